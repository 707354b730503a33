"""Shared test helpers: processes, broker registration."""
