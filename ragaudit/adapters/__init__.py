"""Adapters: project the outputs of real RAG stacks into ragaudit payloads, traces and audits (docs/reference.md §8)."""
