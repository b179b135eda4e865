"""Checks of what a run produced: the payload rules (`validation`), the metrics (`metrics`), the
gold-set tools that anchor gold spans (`goldtools`), and the columnar stores that hold every run and
question row (`runstore`, `questionstore`)."""
