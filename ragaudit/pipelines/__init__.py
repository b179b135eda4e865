"""Pipelines (docs/reference.md §5): reference, replay, python, command."""
