"""The daemon's HTTP API: FastAPI app, bearer tokens, the status document."""
