"""Readers: the only code that touches files and raw JSON/TOML. They return canonical types."""
