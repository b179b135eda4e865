"""The python pipeline: a user's object made by a factory, called in-process (SPEC §5).

`factory` is `"module:callable"` or the name of an entry point in the `ragaudit.pipelines`
group. The callable gets the config's `options` as keyword arguments and returns an object with
`index_info()` and `run(query, *, seed, k)`; `run` returns a trace dict (or a Trace).
"""
from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

from ragaudit.errors import PipelineStartError, describe
from ragaudit.pipelines.base import Request, error_trace, trace_from_output
from ragaudit.types import LiveIndex, Trace

ENTRY_POINT_GROUP = "ragaudit.pipelines"
INDEX_KEYS = ("index_hash", "analyzer", "embed_model", "store")


class PythonPipeline:
    def __init__(self, name: str, factory: str, options: dict | None = None, *, offset_unit: str = "char"):
        self.name, self.factory, self.offset_unit = name, factory, offset_unit
        make = load_factory(name, factory)
        options = dict(options or {})
        try:
            self.target = make(**options)
        except Exception as exc:
            raise PipelineStartError(f"pipeline {name!r}: factory {factory!r} failed when called with "
                                     f"options {sorted(options)}: {type(exc).__name__}: {exc}") from exc
        if not callable(getattr(self.target, "run", None)):
            raise PipelineStartError(f"pipeline {name!r}: factory {factory!r} must return an object with "
                                     f"run(query, *, seed, k), found {type(self.target).__name__} without run")
        self._index: LiveIndex | None = None
        self._closed = False

    def index_info(self) -> LiveIndex | None:
        """The user's index as of now; the last one seen when it cannot be read.

        The runner asks once more after `close()` to record index hashes in the manifest, when
        the user's object may be gone, so this never raises.
        """
        if not self._closed:
            try:
                self._index = self._read_index()
            except Exception:
                pass
        return self._index

    def run(self, request: Request) -> Trace:
        index = None
        try:
            index = self._index = self._read_index()
            output = self.target.run(request.query, seed=request.seed, k=request.k)
            return trace_from_output(self.name, request, output, offset_unit=self.offset_unit, index=index)
        except Exception as exc:  # any failure of user code is this run's pipeline_error, never the runner's
            return error_trace(self.name, request, f"{type(exc).__name__}: {exc}", index)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        close = getattr(self.target, "close", None)
        if callable(close):
            close()

    def _read_index(self) -> LiveIndex | None:
        read = getattr(self.target, "index_info", None)
        return as_live_index(read()) if callable(read) else None


def as_live_index(value: Any) -> LiveIndex | None:
    """`index_info()` output (a LiveIndex, a dict of INDEX_KEYS, or None) as a LiveIndex."""
    if value is None or isinstance(value, LiveIndex):
        return value
    if not isinstance(value, dict):
        raise TypeError(f"index_info() must return a dict {{{', '.join(INDEX_KEYS)}}}, a LiveIndex or None, "
                        f"found {describe(value)}")
    for key in INDEX_KEYS:
        if value.get(key) is not None and not isinstance(value[key], str):
            raise TypeError(f"index_info()[{key!r}] must be a string, found {describe(value[key])}")
    return LiveIndex(**{key: value.get(key) for key in INDEX_KEYS})


def load_factory(name: str, factory: str):
    """The callable named by `"module:callable"` or by an entry point; PipelineStartError if there is none."""
    if not isinstance(factory, str) or not factory.strip():
        raise PipelineStartError(f"pipeline {name!r}: factory must be \"module:callable\" or an entry-point "
                                 f"name in group {ENTRY_POINT_GROUP!r}, found {describe(factory)}")
    if ":" in factory:
        make = _from_module(name, factory)
    else:
        make = _from_entry_point(name, factory)
    if not callable(make):
        raise PipelineStartError(f"pipeline {name!r}: factory {factory!r} must be callable, "
                                 f"found {describe(make)}")
    return make


def _from_module(name: str, factory: str):
    module_name, _, attribute = factory.partition(":")
    if not module_name or not attribute:
        raise PipelineStartError(f"pipeline {name!r}: factory must be \"module:callable\", found {factory!r}")
    try:
        target = importlib.import_module(module_name)
    except Exception as exc:  # a broken user module can raise anything while importing
        raise PipelineStartError(f"pipeline {name!r}: cannot import module {module_name!r} for factory "
                                 f"{factory!r}: {type(exc).__name__}: {exc}") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise PipelineStartError(f"pipeline {name!r}: module {module_name!r} has no attribute "
                                     f"{attribute!r} (factory {factory!r})") from None
    return target


def _from_entry_point(name: str, factory: str):
    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    matches = [ep for ep in found if ep.name == factory]
    if not matches:
        available = ", ".join(sorted({ep.name for ep in found})) or "none installed"
        raise PipelineStartError(f"pipeline {name!r}: no entry point {factory!r} in group "
                                 f"{ENTRY_POINT_GROUP!r} (available: {available}); to import from a module "
                                 f"write the factory as \"module:callable\"")
    entry = matches[0]
    try:
        return entry.load()
    except Exception as exc:
        raise PipelineStartError(f"pipeline {name!r}: cannot load entry point {factory!r} = {entry.value!r}: "
                                 f"{type(exc).__name__}: {exc}") from exc
