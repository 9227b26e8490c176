"""exchange: carries price changes and financial postings from 1C:Enterprise to an online shop.

The pipeline, one module per stage::

    staging_intents --intake--> messages --coalesce--> lease --site--> classify --> record
"""

__version__ = "0.1.0"
