"""A python pipeline in a process of its own (`isolation = "process"`, docs/reference.md §5).

Every instance of a python pipeline (one per worker) normally shares ragaudit's process, and so
every module-level state of the libraries it uses: a library that keeps one model, one device
setting or one scratch buffer per process gives one instance's state to another. With
`isolation = "process"` each instance is a worker process, `python -m ragaudit.pipelines.isolated
PIPELINE_JSON`, which imports the factory as the python pipeline does (`load_factory`), calls it
with the options, and answers requests as a command pipeline does: one JSON request per line on stdin, one
trace per line on stdout. What the user's code prints goes to stderr, so it cannot corrupt the
answers. The first line the process writes says whether the factory gave a pipeline
(`{"ready": true, "index": ...}`) or not (`{"start_error": "..."}`: exit 4 as in-process); after
the last request it calls the object's `close()`, and what that raises is its last line
(`{"close_error": "..."}`), the warning `close()` gives as in-process.

The parent is a `CommandPipeline`, so the process is its own process group, ended with ragaudit
however ragaudit ends, and a run that times out kills it (unlike a thread, which Python cannot
stop): the next run starts a new one, which calls the factory again.

Each run reads `index_info()` first, as in-process; what `run()` returns goes back as written (a
`Trace` as its dict), with the index added when it has none, so the parent reads it exactly as
the in-process pipeline reads it. What `run()` or `index_info()` raises is that run's error.
"""

from __future__ import annotations

import json
import os
import queue
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable, cast

from ragaudit.core.errors import PipelineStartError, UsageError, describe
from ragaudit.core.markers import ALL_FORMS
from ragaudit.core.types import LiveIndex, Trace
from ragaudit.pipelines.base import Excluded, Request, error_trace, without_surrogates
from ragaudit.pipelines.command import _EOF, WAKE_S, CommandPipeline, _Child
from ragaudit.pipelines.python import INDEX_KEYS, PythonPipeline, as_live_index, exception_text

if TYPE_CHECKING:
    from ragaudit.io.config import PipelineConfig
    from ragaudit.pipelines.inputs import Inputs


class IsolatedPythonPipeline(CommandPipeline):
    """A python pipeline whose object lives in a worker process (see the module)."""

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
        """`corpus_path` and `exclude` reach the factory in the process as they do in-process."""
        spec = {
            "name": name,
            "factory": factory,
            "options": options or {},
            "search_path": search_path,
            "corpus_path": corpus_path,
            "exclude": [list(e) for e in exclude],
        }
        try:
            encoded = json.dumps(spec, sort_keys=True)
        except (TypeError, ValueError) as exc:  # TOML gives only JSON's types; a Python caller may not
            raise PipelineStartError(f"pipeline {name!r}: options for a worker process must be JSON: {exc}") from exc
        self.factory = factory
        command = [sys.executable, "-m", "ragaudit.pipelines.isolated", encoded]
        super().__init__(name, command, timeout_s=timeout_s, offset_unit=offset_unit, markers=markers)
        self.shown = f"the process of pipeline {name!r} (factory {factory!r})"

    def _start(self) -> _Child:
        child = super()._start()
        while True:  # the factory may take long (loading a model): as long as in-process
            try:
                item = child.lines.get(timeout=WAKE_S)
            except queue.Empty:
                if self._killed:
                    item = _EOF
                else:
                    continue
            if item is _EOF:
                code, tail = child.kill(), child.stderr_tail
                self._children.discard(child)
                raise PipelineStartError(
                    f"pipeline {self.name!r}: the process of factory {self.factory!r} ended before it was "
                    f"ready (exit code {code})" + (f"; stderr: {tail}" if tail else "")
                )
            line = cast(bytes, item)  # not _EOF: a line of stdout
            if not line.strip():
                continue
            hello = _hello(line)
            if "start_error" in hello:
                child.kill()
                self._children.discard(child)
                raise PipelineStartError(str(hello["start_error"]))
            self._index = hello.get("index") or self._index
            return child

    def close(self) -> str | None:
        """End the worker as a command pipeline ends; the warning is also what the object's own
        `close()` raised in it, as in-process."""
        child = self._child
        warning = super().close()
        if warning is not None or child is None:
            return warning
        while True:  # the worker's last lines, read to the end now that it has ended
            try:
                item = child.lines.get_nowait()
            except queue.Empty:
                return None
            if item is _EOF:
                return None
            try:
                said = json.loads(cast(bytes, item))  # not _EOF: a line of stdout
            except ValueError:
                continue
            if isinstance(said, dict) and isinstance(said.get("close_error"), str):
                close_error: str = said["close_error"]
                return close_error

    def _timed_out(self, request: Request) -> Trace:
        self._discard_child(kill=True)
        if self._killed:
            return error_trace(self.name, request, f"pipeline {self.name!r} was stopped")
        return error_trace(
            self.name,
            request,
            f"run() timed out after {self.timeout_s:g} s; its process was killed, and the next run starts another",
            self._index,
        )


def _hello(line: bytes) -> dict[str, Any]:
    """The worker's first line: {"ready": true, "index"} or {"start_error"}."""
    try:
        hello = json.loads(line)
    except ValueError:
        hello = None
    if not isinstance(hello, dict) or not ("ready" in hello or "start_error" in hello):
        return {"start_error": f"expected the worker's ready line, found {line[:200]!r}"}
    index = hello.get("index")
    if isinstance(index, dict):
        hello["index"] = LiveIndex(**{key: index.get(key) for key in INDEX_KEYS})
    return hello


# ---- the worker process ---------------------------------------------------------------------


def _index_dict(index: LiveIndex | None) -> dict[str, Any] | None:
    return None if index is None else {key: getattr(index, key) for key in INDEX_KEYS}


def _plain(value: Any) -> Any:
    """A value json cannot write as it is: numpy scalars and arrays, tuples of them, sets."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    raise TypeError(f"cannot send {describe(value)} to ragaudit")


def answer(target: Any, request: dict[str, Any]) -> dict[str, Any]:
    """What the object answers to one request, as the line the parent reads (see the module)."""
    keys = {key: request.get(key) for key in ("qid", "variant", "seed")}
    index = None
    try:
        read = getattr(target, "index_info", None)
        index = as_live_index(read()) if callable(read) else None
        output = target.run(request["query"], seed=request["seed"], k=request["k"])
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt included, as in-process
        return {**keys, "index": _index_dict(index), "error": exception_text(exc)}
    if isinstance(output, Trace):
        from ragaudit.io.traces import trace_to_dict

        output = trace_to_dict(output)
    if not isinstance(output, dict):
        return {**keys, "index": _index_dict(index), "error": f"expected a trace object, found {describe(output)}"}
    out = {**output, **keys}
    if index is not None and "index" not in output:
        out["index"] = _index_dict(index)
    return out


def serve(spec: dict[str, Any], stdin: Iterable[bytes], out: BinaryIO) -> int:
    """Build the pipeline of `spec`, say so on `out`, then answer each request line of `stdin`."""

    def say(message: dict[str, Any]) -> None:
        try:
            line = json.dumps(without_surrogates(message), default=_plain, allow_nan=True)
        except (TypeError, ValueError) as exc:
            keys = {key: message.get(key) for key in ("qid", "variant", "seed")}
            line = json.dumps({**keys, "error": f"cannot send the output of run() to ragaudit: {exc}"})
        out.write(line.encode("utf-8", "replace") + b"\n")
        out.flush()

    try:
        built = PythonPipeline(
            spec["name"],
            spec["factory"],
            spec["options"],
            search_path=spec["search_path"],
            timeout_s=86_400.0,
            corpus_path=spec.get("corpus_path"),
            exclude=tuple((doc, section) for doc, section in spec.get("exclude") or ()),
        )
    except PipelineStartError as exc:
        say({"start_error": str(exc)})
        return 4
    target = built.target
    read = getattr(target, "index_info", None)
    try:
        index = as_live_index(read()) if callable(read) else None
    except BaseException:  # noqa: BLE001 - a failing index_info() fails the runs that read it, not the start
        index = None
    say({"ready": True, "index": _index_dict(index)})
    for line in stdin:
        if line.strip():
            say(answer(target, json.loads(line)))
    close = getattr(target, "close", None)
    if callable(close):
        try:
            close()
        except BaseException as exc:  # noqa: BLE001 - every run has answered: the parent warns, as in-process
            say({"close_error": f"pipeline {spec['name']!r}: close() raised {exception_text(exc)}"})
    return 0


def main(argv: list[str]) -> int:
    out = os.fdopen(os.dup(1), "wb")  # the answers; fd 1, and so print(), now write to stderr
    os.dup2(2, 1)
    return serve(json.loads(argv[1]), sys.stdin.buffer, out)


if __name__ == "__main__":
    sys.exit(main(sys.argv))


def build(spec: PipelineConfig, inputs: Inputs, exclude: Excluded = ()) -> PythonPipeline | IsolatedPythonPipeline:
    """The python pipeline of `spec`: its factory's object in this process, or in a worker process of its own
    (`isolation = "process"`); the factory's module is looked for beside the config too."""
    o, config = spec.options, inputs.config
    if not o["factory"]:
        raise UsageError(f'pipeline {spec.name!r}: a python pipeline needs `factory = "module:callable"`')
    folder = str(Path(config.path).parent.resolve()) if config.path else None
    built = IsolatedPythonPipeline if o.get("isolation") == "process" else PythonPipeline
    return built(
        spec.name,
        o["factory"],
        o["options"],
        offset_unit=config.audit.offset_unit,
        markers=config.audit.marker_forms,
        timeout_s=o["timeout_s"],
        search_path=folder,
        corpus_path=str(Path(config.audit.corpus).resolve()) if config.audit.corpus else None,
        exclude=exclude,
    )
