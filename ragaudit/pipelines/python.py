"""The python pipeline: a user's object made by a factory, called in-process (docs/reference.md §5).

`factory` is `"module:callable"` or the name of an entry point in the `ragaudit.pipelines`
group. The callable gets the config's `options` as keyword arguments and returns an object with
`index_info()` and `run(query, *, seed, k)`; `run` returns a trace dict (or a Trace).

User code runs in ragaudit's process, so nothing it raises may end ragaudit: every call into the
object (`index_info`, `run`, `close`) runs in a daemon thread of its own and anything it raises,
`SystemExit` and `KeyboardInterrupt` included, becomes that run's `pipeline_error` (or, for
`close`, a warning). A real ctrl-C is delivered to the main thread, never to these threads, so it
still stops ragaudit.

`timeout_s` bounds each run. Python cannot kill a thread: a call that times out is abandoned and
may still be running. The object is kept, and the next call waits (within its own timeout) until
the abandoned one has returned, so the object is never entered by two calls at once: one
instance per worker is what lets a user write it without locks, and calling the factory again
would build a second copy of whatever the first one holds (an index, a model, a connection) while
the first is still busy with it. A call that never returns makes every later run of that
instance time out after `timeout_s`, rather than hang.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
import threading
import time
from collections.abc import Mapping
from importlib.machinery import PathFinder
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ragaudit.core.errors import PipelineStartError, describe
from ragaudit.core.markers import ALL_FORMS
from ragaudit.core.types import LiveIndex, Trace
from ragaudit.pipelines.base import (
    Request,
    check_timeout,
    error_trace,
    exclusions,
    trace_from_output,
    without_surrogates,
)

if TYPE_CHECKING:
    from types import ModuleType

ENTRY_POINT_GROUP = "ragaudit.pipelines"
INDEX_KEYS = ("index_hash", "analyzer", "embed_model", "store")


CALL_THREAD = "ragaudit-python-"  # the name of every thread a call into a user's object runs on, then the pipeline's


def calls_left_running(wait_s: float = 0.2) -> bool:
    """Whether a call into a user's object is still running (one abandoned after a timeout or a stop
    signal), once the calls that are returning now had `wait_s` to end."""
    deadline = time.monotonic() + wait_s
    for thread in threading.enumerate():
        if thread.name.startswith(CALL_THREAD):
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                return True
    return False


class CallTimedOut(Exception):
    """A call into the user's object did not return within the timeout."""


class _Calls:
    """Calls into one user object, one at a time, each in a daemon thread waited on for at most a timeout."""

    def __init__(self, timeout_s: float, name: str):
        self.timeout_s, self.name = timeout_s, name
        self._idle = threading.Lock()  # held while a call runs, released by the thread that ran it

    def call(self, what: str, fn: Callable[[], Any], *, wait_for_idle: bool = True) -> tuple[Any, BaseException | None]:
        """`(fn()'s result, None)`, or `(None, what fn raised)`; CallTimedOut when it does not finish in time.

        What `fn` raised is returned, not raised, so that the caller's handlers can only ever see
        user failures: a real ctrl-C while this thread waits propagates as usual.
        """
        deadline = time.monotonic() + self.timeout_s
        if not self._idle.acquire(timeout=self.timeout_s if wait_for_idle else 0):
            raise CallTimedOut(
                f"{what} timed out after {self.timeout_s:g} s waiting for an earlier call "
                f"that timed out and is still running"
            )
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                outcome["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt included (docs/reference.md §5)
                outcome["error"] = exc
            finally:
                self._idle.release()
                done.set()

        try:
            threading.Thread(target=work, name=f"{CALL_THREAD}{self.name}", daemon=True).start()
        except RuntimeError as exc:  # no thread to be had: this call fails, the object stays usable
            self._idle.release()
            return None, exc
        if not done.wait(max(deadline - time.monotonic(), 0)):
            raise CallTimedOut(
                f"{what} timed out after {self.timeout_s:g} s; the call was abandoned and may still be running"
            )
        return outcome.get("value"), outcome.get("error")


def exception_text(exc: BaseException) -> str:
    """`Type: message` for an exception from user code, whose `__str__` may itself fail."""
    try:
        message = str(exc)
    except (Exception, SystemExit):  # a broken __str__ must not hide the failure it reports
        message = "<the exception's message could not be read>"
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


class PythonPipeline:
    def __init__(
        self,
        name: str,
        factory: str,
        options: dict[str, Any] | None = None,
        *,
        offset_unit: str = "char",
        markers: frozenset[str] = ALL_FORMS,
        timeout_s: float = 30.0,
        search_path: str | None = None,
        corpus_path: str | None = None,
        exclude: tuple[tuple[str, str | None], ...] = (),
    ):
        """`corpus_path` and `exclude` reach the factory when it declares parameters of those names
        (docs/guide.md §3.3): the corpus it must index, and the sections to leave out of retrieval."""
        self.name, self.factory, self.offset_unit, self.markers = name, factory, offset_unit, markers
        self.timeout_s = check_timeout(name, timeout_s)
        make = load_factory(name, factory, search_path=search_path)
        given = {"corpus_path": corpus_path, "exclude": exclusions(exclude)}
        options = {**(options or {}), **{key: given[key] for key in takes(make) if corpus_path is not None}}
        try:
            self.target = make(**options)
        except (Exception, SystemExit) as exc:  # a factory calling sys.exit() must not end ragaudit
            raise PipelineStartError(
                f"pipeline {name!r}: factory {factory!r} failed when called with "
                f"options {sorted(options)}: {exception_text(exc)}"
            ) from exc
        if not callable(getattr(self.target, "run", None)):
            raise PipelineStartError(
                f"pipeline {name!r}: factory {factory!r} must return an object with "
                f"run(query, *, seed, k), found {type(self.target).__name__} without run"
            )
        self._calls = _Calls(self.timeout_s, name)
        self._index: LiveIndex | None = None
        self._closed = False

    def index_info(self) -> LiveIndex | None:
        """The user's index as of now; the last one seen when it cannot be read.

        The runner asks once more after the runs to record index hashes in the manifest, when the
        object may be busy with an abandoned call or gone, so this never raises and never waits
        for an earlier call.
        """
        if not self._closed:
            try:
                index, failed = self._calls.call("index_info()", self._read_index, wait_for_idle=False)
            except CallTimedOut:
                return self._index
            if failed is None:
                self._index = index
        return self._index

    def run(self, request: Request) -> Trace:
        if self._closed:
            return error_trace(self.name, request, f"pipeline {self.name!r} is closed")
        seen: dict[str, LiveIndex | None] = {}

        def call() -> Any:
            seen["index"] = self._read_index()
            return self.target.run(request.query, seed=request.seed, k=request.k)

        try:
            output, failed = self._calls.call("run()", call)
        except CallTimedOut as exc:
            return error_trace(self.name, request, str(exc), seen.get("index"))
        if "index" in seen:
            self._index = seen["index"]
        index = seen.get("index")
        if failed is not None:
            return error_trace(self.name, request, exception_text(failed), index)
        try:
            return trace_from_output(
                self.name, request, output, offset_unit=self.offset_unit, markers=self.markers, index=index
            )
        except Exception as exc:  # output whose own methods fail (a dict subclass, say) fails this run only
            return error_trace(self.name, request, f"cannot read the output of run(): {exception_text(exc)}", index)

    def close(self) -> str | None:
        """Call the object's `close()`, if it has one. Never raises: what went wrong comes back as a
        warning to show, since every run has finished by now and their traces are safe."""
        if self._closed:
            return None
        self._closed = True
        close = getattr(self.target, "close", None)
        if not callable(close):
            return None
        try:
            _, failed = self._calls.call("close()", close)
        except CallTimedOut as exc:
            return f"pipeline {self.name!r}: {exc}"
        if failed is not None:
            return f"pipeline {self.name!r}: close() raised {exception_text(failed)}"
        return None

    def _read_index(self) -> LiveIndex | None:
        read = getattr(self.target, "index_info", None)
        return as_live_index(read()) if callable(read) else None


REPOINTED = ("corpus_path", "exclude")  # the factory parameters a probe re-points a pipeline with


def takes(make: Callable[..., Any]) -> tuple[str, ...]:
    """Which of REPOINTED the factory declares by name: what ragaudit can tell it about the corpus."""
    import inspect

    try:
        parameters = inspect.signature(make).parameters
    except (TypeError, ValueError):  # a builtin or a C callable without a signature
        return ()
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(key for key in REPOINTED if key in parameters and parameters[key].kind in named)


def as_live_index(value: Any) -> LiveIndex | None:
    """`index_info()` output as a LiveIndex: None; a mapping with the INDEX_KEYS; or an object with
    those four attributes (a LiveIndex, the adapters' `IndexInfo`, a user's own dataclass).

    Missing mapping keys are None; every value must be a string or None.
    """
    if value is None:
        return None
    if isinstance(value, Mapping):
        fields = {key: value.get(key) for key in INDEX_KEYS}
    elif all(hasattr(value, key) for key in INDEX_KEYS):
        fields = {key: getattr(value, key) for key in INDEX_KEYS}
    else:
        raise TypeError(
            f"index_info() must return None, a dict {{{', '.join(INDEX_KEYS)}}} or an object with "
            f"those attributes (a LiveIndex or an IndexInfo), found {describe(value)}"
        )
    for key, field in fields.items():
        if field is not None and not isinstance(field, str):
            raise TypeError(f"index_info() {key} must be a string, found {describe(field)}")
    index: LiveIndex = without_surrogates(LiveIndex(**fields))
    return index


def load_factory(name: str, factory: str, *, search_path: str | None = None) -> Callable[..., Any]:
    """The callable named by `"module:callable"` or by an entry point; PipelineStartError if there is none.

    The module is imported from `sys.path` (an installed package, or a module in a folder on
    PYTHONPATH), and else from `search_path` (the config's folder, so a module beside the config
    loads). That folder is on `sys.path` only while the module is imported, and last, so it never
    shadows an installed package and leaves the process as it found it.
    """
    if not isinstance(factory, str) or not factory.strip():
        raise PipelineStartError(
            f'pipeline {name!r}: factory must be "module:callable" or an entry-point '
            f"name in group {ENTRY_POINT_GROUP!r}, found {describe(factory)}"
        )
    if ":" in factory:
        make = _from_module(name, factory, search_path)
    else:
        make = _from_entry_point(name, factory)
    if not callable(make):
        raise PipelineStartError(f"pipeline {name!r}: factory {factory!r} must be callable, found {describe(make)}")
    return make


def module_file(factory: str, search_path: str | None = None) -> Path | None:
    """The source of the module a factory names, where `load_factory` would import it from, found
    without importing it (a worker process may be the only place it is imported): its file, or its
    folder for a package; None when it has none (a module made in memory) or cannot be found."""
    if ":" in factory:
        module_name = factory.partition(":")[0]
    else:
        found = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == factory]
        if not found:
            return None
        module_name = found[0].module
    loaded = sys.modules.get(module_name)
    if loaded is not None:
        spec = getattr(loaded, "__spec__", None)
    else:
        spec, path = None, [*sys.path, *([search_path] if search_path else [])]
        parts = module_name.split(".")
        for n in range(len(parts)):
            spec = PathFinder.find_spec(".".join(parts[: n + 1]), path)
            if spec is None:
                return None
            path = list(spec.submodule_search_locations or [])
    if spec is None or not spec.origin or not spec.has_location:
        return None
    origin = Path(spec.origin)
    return origin.parent if spec.submodule_search_locations else origin


def _import(module_name: str, search_path: str | None) -> ModuleType:
    if search_path is None or search_path in sys.path:
        return importlib.import_module(module_name)
    sys.path.append(search_path)
    try:
        return importlib.import_module(module_name)
    finally:
        sys.path.remove(search_path)


def _from_module(name: str, factory: str, search_path: str | None = None) -> object:
    module_name, _, attribute = factory.partition(":")
    if not module_name or not attribute:
        raise PipelineStartError(f'pipeline {name!r}: factory must be "module:callable", found {factory!r}')
    try:
        target: object = _import(module_name, search_path)
    except (Exception, SystemExit) as exc:  # a broken user module can raise anything while importing
        raise PipelineStartError(
            f"pipeline {name!r}: cannot import module {module_name!r} for factory {factory!r}: {exception_text(exc)}"
        ) from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise PipelineStartError(
                f"pipeline {name!r}: module {module_name!r} has no attribute {attribute!r} (factory {factory!r})"
            ) from None
    return target


def _from_entry_point(name: str, factory: str) -> object:
    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    matches = [ep for ep in found if ep.name == factory]
    if not matches:
        available = ", ".join(sorted({ep.name for ep in found})) or "none installed"
        raise PipelineStartError(
            f"pipeline {name!r}: no entry point {factory!r} in group "
            f"{ENTRY_POINT_GROUP!r} (available: {available}); to import from a module "
            f'write the factory as "module:callable"'
        )
    entry = matches[0]
    try:
        return entry.load()
    except (Exception, SystemExit) as exc:
        raise PipelineStartError(
            f"pipeline {name!r}: cannot load entry point {factory!r} = {entry.value!r}: {exception_text(exc)}"
        ) from exc
