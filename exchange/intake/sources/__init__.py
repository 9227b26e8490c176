"""Brokers as ways in (contract 12): RabbitMQ (``rabbitmq.py``) and Redis Streams
(``redis_streams.py``). ``common.py`` holds what both do alike: read a body, judge and stage
its intents through ``intake.intents`` (the JSON intake's code), record what is not an intent
in the quarantine."""
