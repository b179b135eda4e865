"""The audit: traces scored as they come (`audit`), the report model built from it (`reporting`),
where the work runs (`executors`), the checks of inputs without an audit (`checking`), and the history
of finished runs (`history`, `history_series`)."""
