"""Pipelines (SPEC §5): reference, replay, python, command."""
