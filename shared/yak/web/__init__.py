"""Pieces every Yak HTTP service shares: health endpoints and the uvicorn runner."""
