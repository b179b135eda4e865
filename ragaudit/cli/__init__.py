"""The `ragaudit` command line: commands that parse, call `ragaudit.flows.api` and print (`commands`),
and their options as data (`options`)."""
