"""What crosses between this process and its worker processes (`ragaudit.core.execution.Processes`):
tasks and their results, pickled the fast way for slotted dataclasses and without the cyclic
garbage collector, which has nothing to find in a batch of runs and would walk every object of it."""

from __future__ import annotations

import copyreg
import dataclasses
import gc
import inspect
import io
import operator
import pickle
from typing import TYPE_CHECKING, Any, Callable, TypeVar

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

F = TypeVar("F", bound=Callable[..., Any])


class _Reducers(dict[type, Callable[[Any], Any]]):
    """pickle's dispatch table, plus for each slotted dataclass (traces, payloads): built again by its
    constructor from its init fields, its other fields then set (twice as fast as field by field),
    but for those whose metadata says "derived": the constructor sets them (a payload's span)."""

    def __missing__(self, cls: type) -> Callable[[Any], Any]:
        if issubclass(cls, type):  # a class of a metaclass (an ABC, an Enum): pickled by name, as pickle does
            raise KeyError(cls)
        fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) and "__slots__" in vars(cls) else ()
        init = tuple(f.name for f in fields if f.init)
        rest = tuple(f.name for f in fields if not f.init and not f.metadata.get("derived"))
        params = list(inspect.signature(cls).parameters.values()) if fields else []
        reduce: Callable[[Any], Any]
        if (
            not fields
            or [p.name for p in params] != list(init)
            or any(p.kind != p.POSITIONAL_OR_KEYWORD for p in params)
        ):
            reduce = operator.methodcaller("__reduce_ex__", pickle.HIGHEST_PROTOCOL)
        elif rest:
            values, rest_values = _getter(init), _getter(rest)
            reduce = lambda obj: (_rebuilt, (cls, values(obj), rest, rest_values(obj)))  # noqa: E731
        else:
            values = _getter(init)
            reduce = lambda obj: (cls, values(obj))  # noqa: E731
        self[cls] = reduce
        return reduce


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of an object's values of `names`."""
    if len(names) > 1:
        return operator.attrgetter(*names)
    one = operator.attrgetter(names[0]) if names else None
    return (lambda obj: (one(obj),)) if one else (lambda obj: ())


_REDUCERS = _Reducers(copyreg.dispatch_table)


def _rebuilt(cls: type, args: tuple[Any, ...], names: tuple[str, ...], values: tuple[Any, ...]) -> Any:
    obj = cls(*args)
    for name, value in zip(names, values):
        object.__setattr__(obj, name, value)
    return obj


def without_collector(fn: F) -> F:
    """Mark a task that makes no reference cycles (the scoring of a batch, say): a worker process
    runs it, from the unpickling of its arguments to its return, without the cyclic garbage
    collector, which would otherwise walk every object of the batch it was just handed, and again
    as they age. What it leaves behind is freed when its last reference goes, as before."""
    fn.without_collector = True  # type: ignore[attr-defined]
    return fn


def received(pipe: Connection[Any, Any]) -> Any:
    """The next value down `pipe`, unpickled without the cyclic collector (a batch: many objects, no cycles)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return pipe.recv()
    finally:
        if enabled:
            gc.enable()


def dumps(value: Any) -> bytes:
    """`value` pickled for a worker's pipe (read back by `pickle.loads`), dataclasses the fast way."""
    out = io.BytesIO()
    pickler = pickle.Pickler(out, pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _REDUCERS
    enabled = gc.isenabled()
    gc.disable()  # as for `_received`: many new tuples, no cycles
    try:
        pickler.dump(value)
    finally:
        if enabled:
            gc.enable()
    return out.getvalue()
