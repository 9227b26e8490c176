"""RabbitMQ as a target (contract 12): the shop's back end reads the prices from an exchange."""
