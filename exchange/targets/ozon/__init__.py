"""The Ozon Seller API as a channel (contract 14)."""
