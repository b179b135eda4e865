"""Every command's flow end to end: the library facade (`api`), one audit from a config (`app`),
calibration, fault injection, counterfactual probes, the production audit-log, and the pytest plugin
with its audit cache."""
