"""Files in and out: the only code that touches files and raw JSON/TOML (config, corpus, gold,
traces, production spans, labels, run directories). Readers return canonical types."""
