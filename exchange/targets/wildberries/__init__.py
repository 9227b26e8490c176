"""Wildberries\x27 Prices and Discounts API as a target (contract 14)."""
