"""Yak coordinator service."""
