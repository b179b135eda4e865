"""Tasks for the executor tests, importable in a spawned worker process (tests/ is on its path)."""

import dataclasses
import os
import time
from pathlib import Path

from ragaudit.core.wire import without_collector

_setup: list = []


def square(x: int) -> int:
    return x * x


def pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def die_once(marker: str, value: int) -> int:
    """Ends its worker process the first time it runs (while `marker` exists), then answers."""
    try:
        os.rename(marker, marker + ".taken")
    except FileNotFoundError:
        return value
    os._exit(9)


def die_always(_: object = None) -> None:
    os._exit(9)


def wait_for(path: str) -> int:
    """Works until `path` appears: a worker kept busy until the test says."""
    while not Path(path).exists():
        time.sleep(0.02)
    return os.getpid()


def fail(message: str) -> None:
    raise ValueError(message)


class Unpicklable(Exception):
    def __init__(self, a: int, b: int):
        super().__init__(f"{a} and {b}")


def fail_unpicklable() -> None:
    raise Unpicklable(1, 2)


def _refuse(text: str):
    raise ValueError(text)


class Unreadable:
    """A value whose pickle cannot be loaded (as a class of another version of a module)."""

    def __reduce__(self):
        return (_refuse, ("this value cannot be rebuilt",))


def unreadable() -> Unreadable:
    return Unreadable()


def remember(value: str) -> None:
    _setup.append(value)


def broken_setup() -> None:
    raise OSError("the setup cannot read its file")


def remembered() -> list:
    return list(_setup)


def exit_at_setup() -> None:
    os._exit(3)


@dataclasses.dataclass(frozen=True, slots=True)
class KeywordOnly:
    """A slotted dataclass its constructor cannot build from its fields in order."""

    a: int
    b: list = dataclasses.field(default_factory=list, kw_only=True)


@dataclasses.dataclass(slots=True)
class Stamped:
    """A slotted dataclass with a field its constructor does not take, set after it."""

    a: int
    stamp: str = dataclasses.field(init=False, default="")


def collecting(_: object = None) -> bool:
    """Is the cyclic garbage collector on while this task runs?"""
    import gc

    return gc.isenabled()


@without_collector
def uncollected(_: object = None) -> bool:
    """`collecting`, marked to run without the collector."""
    import gc

    return gc.isenabled()


def frozen(config_path: str | None = None, digest: str | None = None) -> int:
    """The objects the collector skips, once the run's inputs are loaded when a config is given."""
    import gc

    if config_path is not None:
        from ragaudit.auditing.executors import _inputs

        _inputs(config_path, digest)
    return gc.get_freeze_count()
