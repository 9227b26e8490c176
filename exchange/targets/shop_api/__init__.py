"""The shop API of contract 5 (and its batch API, 5b): client, answers, batch."""
