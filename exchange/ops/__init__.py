"""Operations: quarantine actions, status, prune, check, metrics and health."""
