"""Shared names of the web tests (the credentials the served settings carry)."""

USER, PASSWORD, TOKEN = "1c-node", "pa55-Word!", "intake-token-123"
