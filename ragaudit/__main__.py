"""The `ragaudit` program: `python -m ragaudit`, and the `ragaudit` command (pyproject's script)."""


def run() -> None:
    """The command line (`ragaudit.cli.commands.main`) as the process's entry point: once it is done, the
    process ends as `ragaudit.pipelines.workers.end_process` says, never in the middle of a user's call."""
    from ragaudit.cli.commands import main
    from ragaudit.pipelines.workers import end_process

    try:
        main()
    except SystemExit as done:
        end_process(done.code)
        raise


if __name__ == "__main__":
    run()
