"""The domain: states and transitions, reasons, kind policies, verdicts, message identity, the
retry decision, the breaker and the clock. Pure: it imports nothing else of the project."""
