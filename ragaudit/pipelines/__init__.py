"""Pipelines (docs/reference.md §5): reference, replay, python, command; the inputs a run shares
across them (`inputs`) and the runner that calls them on workers (`runner`, `workers`)."""
