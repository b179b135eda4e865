"""Metrics (SPEC §3)."""
