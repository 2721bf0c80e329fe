"""Yak broker service."""
