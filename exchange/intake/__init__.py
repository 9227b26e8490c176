"""The way in: the row contract every intent meets, the staging-table reader, and what stores
accepted intents as messages (or quarantine records)."""
