"""Yak console service."""
