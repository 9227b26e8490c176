"""Storage: the schema (``schema``), engines and transactions (``engine``), migrations."""
