"""Metrics (docs/reference.md §3)."""
