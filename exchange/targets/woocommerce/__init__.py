"""WooCommerce as a target (contract 10): REST API v3, prices set through the batch endpoints."""
