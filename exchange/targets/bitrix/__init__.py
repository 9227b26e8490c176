"""1C-Bitrix as a target (contract 10): the service acts as 1C toward the site's own exchange."""
