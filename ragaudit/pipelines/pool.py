"""Building the configured pipelines and lending their instances to the runner's workers."""

from __future__ import annotations

import importlib
import queue
from pathlib import Path

from ragaudit.core.errors import PipelineStartError, UsageError
from ragaudit.core.types import Trace
from ragaudit.io.config import PipelineConfig
from ragaudit.io.config_schema import KINDS
from ragaudit.pipelines.base import Excluded, Pipeline, Request, error_trace
from ragaudit.pipelines.calls import CallPolicy, code_digests, corpus_digest
from ragaudit.pipelines.inputs import Inputs


def build_pipeline(spec: PipelineConfig, inputs: Inputs, *, exclude: Excluded = ()) -> Pipeline:
    """The pipeline of `spec` over the corpus of `inputs`, leaving the sections of `exclude` out of
    what it retrieves (a reference pipeline; a python factory that declares `exclude`): built by its
    kind's builder (`ragaudit.io.config_schema.KINDS`)."""
    kind = KINDS.get(spec.kind)
    if kind is None:
        raise UsageError(f"pipeline {spec.name!r}: unknown kind {spec.kind!r}")
    module, _, function = kind.build.partition(":")
    built: Pipeline = getattr(importlib.import_module(module), function)(spec, inputs, exclude)
    return built


REMOTE_KINDS = tuple(name for name, kind in KINDS.items() if kind.remote)  # may call a service: limits, retries, cache
SHARED_KINDS = tuple(name for name, kind in KINDS.items() if kind.shared)  # one instance serves every worker


class PipelinePool:
    """Instances of one pipeline handed to workers one at a time. User code that misbehaves here
    (a factory that calls sys.exit, a close() that raises) becomes a start error or a warning,
    never ragaudit's own exit."""

    def __init__(
        self,
        spec: PipelineConfig,
        inputs: Inputs | None,
        workers: int,
        *,
        instance: Pipeline | None = None,
        exclude: Excluded = (),
    ):
        """Build the pipeline's instances (leaving the sections of `exclude` out of what they retrieve),
        or serve one given `instance` to every worker (a pipeline that runs elsewhere, such as on a
        Dask cluster)."""
        self.spec = spec
        remote = spec.kind in REMOTE_KINDS
        code = None
        if remote and spec.options.get("cache"):  # the answer cache keys on the pipeline's code
            folder = Path(inputs.config.path).parent.resolve() if inputs is not None and inputs.config.path else None
            code = code_digests(spec.kind, spec.options, folder)
        corpus = corpus_digest(inputs.corpus) if inputs is not None and remote else None
        self.policy = CallPolicy(spec.name, spec.kind, spec.options if remote else {}, code=code, corpus=corpus)
        self.free: queue.Queue[Pipeline] = queue.Queue()
        self.instances: list[Pipeline] = []
        if instance is not None:
            self.shared, self.instances = True, [instance]
            return
        if inputs is None:
            raise ValueError("a pipeline pool needs the inputs to build its pipeline, or an instance")
        size = 1 if spec.kind in SHARED_KINDS else workers
        self.shared = spec.kind in SHARED_KINDS
        for _ in range(size):
            try:
                self.instances.append(build_pipeline(spec, inputs, exclude=exclude))
            except (SystemExit, KeyboardInterrupt) as exc:
                self.close()
                raise PipelineStartError(
                    f"pipeline {spec.name!r}: starting it raised {type(exc).__name__}({exc})"
                ) from None
            except BaseException:
                self.close()
                raise
        for built in self.instances:
            self.free.put(built)

    def prepare(self, queries: list[str]) -> None:
        prepare = getattr(self.instances[0], "prepare", None)
        if prepare is not None:
            prepare(queries)

    def run(self, request: Request) -> Trace:
        if self.shared:
            return self._call(self.instances[0], request)
        instance = self.free.get()
        try:
            return self._call(instance, request)
        finally:
            self.free.put(instance)

    def _call(self, instance: Pipeline, request: Request) -> Trace:
        if not self.policy.active:
            return self._guarded(instance, request)
        index = instance.index_info() if self.policy.cache else None
        return self.policy.call(lambda r: self._guarded(instance, r), request, index)

    def _guarded(self, instance: Pipeline, request: Request) -> Trace:
        try:
            return instance.run(request)
        except PipelineStartError:
            raise  # the pipeline cannot be reached at all: the run stops with exit 4
        except BaseException as exc:  # noqa: BLE001 - a run that crashes is a pipeline_error; the rest goes on
            return error_trace(self.spec.name, request, f"{type(exc).__name__}: {exc}", None)

    def kill(self) -> None:
        """Stop every child process now (on a signal); for kinds without children, nothing."""
        for instance in self.instances:
            kill = getattr(instance, "kill", None)
            if kill is not None:
                kill()

    def close(self) -> list[str]:
        """Close every instance; what went wrong (there or with the answer cache) comes back as warnings."""
        warnings = self.policy.warnings()
        self.policy.close()
        for instance in self.instances:
            try:
                said = instance.close()
            except BaseException as exc:  # noqa: BLE001 - every run has finished: a failing close() loses nothing
                said = f"close() raised {type(exc).__name__}: {exc}"
            if isinstance(said, str) and said:
                warnings.append(said)
        return warnings
