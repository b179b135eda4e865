"""The words every room speaks, importing no other room: canonical types, errors and issue codes,
the report model, the gate-check registry, the text of answers (tokens, sentences, citation markers
and what they cite), the plan of an audit, the execution interface and the progress display."""
