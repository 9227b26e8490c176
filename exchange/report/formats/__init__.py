"""One module per report format."""
