"""Yandex Market's Partner API for prices as a target (contract 14)."""
