"""Yak rest-proxy service."""
