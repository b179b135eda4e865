"""How the runner calls a pipeline that talks to a service: at most `max_in_flight` calls at once,
at most `rate_limit` calls a second, a failed or timed-out call tried again up to `retries` times
after an exponential backoff with jitter (each attempt's error kept in the trace), and, when asked
(`cache = true`), answers kept across runs so an unchanged pipeline costs nothing the second time.

The answer cache is keyed by the pipeline's configuration (kind, factory or command, options),
its code (the content of the factory's module, of the files the command names and of the files
and folders of `code`: a fixed bug misses), the digest of the corpus it answers from (so a probe's
edited copy misses), the live index it reports (so a rebuilt index misses), the query, the seed
and k. It lives in
`answers.sqlite` in ragaudit's cache folder (`RAGAUDIT_CACHE`, else `~/.cache/ragaudit`); a damaged
one is set aside and rebuilt, a locked or read-only one is left alone, and the run goes on either
way (the warnings say what happened).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ragaudit.core.types import LiveIndex, Trace
from ragaudit.pipelines.base import Request

if TYPE_CHECKING:
    from ragaudit.core.types import Corpus

POLICY_KEYS = ("max_in_flight", "rate_limit", "retries", "retry_backoff_s", "cache", "timeout_s", "k")


class RateLimiter:
    """Spaces calls at least 1/rate seconds apart, across threads."""

    def __init__(self, rate: float):
        self.interval, self._next, self._lock = 1.0 / rate, 0.0, threading.Lock()

    def wait(self) -> None:
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval
        if slot > now:
            time.sleep(slot - now)


class AnswerCache:
    """Traces of successful calls by (pipeline config, live index, query, seed, k). A damaged file
    is set aside and rebuilt, and a row that is not such a trace is a miss (`CacheDB`)."""

    def __init__(self, path: Path, config_key: str, corpus: str | None = None):
        from ragaudit.io.cachedb import CacheDB

        self.config_key, self.corpus = config_key, corpus
        self.db = CacheDB(path, {"answers": "key TEXT PRIMARY KEY, trace TEXT"}, what="answer cache")

    def key(self, request: Request, index: LiveIndex | None) -> str:
        body = json.dumps(
            [
                self.config_key,
                self.corpus,
                index and dataclasses.astuple(index),
                request.query,
                request.seed,
                request.k,
            ],
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(body.encode("utf-8", "replace")).hexdigest()

    def get(self, key: str, request: Request) -> Trace | None:
        """The answer kept for `request` under `key`, or None: absent, or a row that is not the
        successful trace of this query and seed."""
        import orjson

        from ragaudit.io.traces import parse_trace

        rows = self.db.read("SELECT trace FROM answers WHERE key = ?", (key,))
        if not rows:
            return None
        try:
            parsed = parse_trace(orjson.loads(rows[0][0]))
        except (orjson.JSONDecodeError, TypeError, ValueError):
            return None
        if not isinstance(parsed, Trace) or parsed.error is not None:
            return None
        return parsed if (parsed.query, parsed.seed) == (request.query, request.seed) else None

    def put(self, key: str, trace: Trace) -> None:
        from ragaudit.io.traces import dump_trace

        self.db.write("INSERT OR REPLACE INTO answers VALUES (?, ?)", [(key, dump_trace(trace))])

    def warnings(self) -> list[str]:
        return list(self.db.warnings)


def corpus_digest(corpus: Corpus) -> str:
    """The sha256 of a corpus's documents (ids and texts): an answer given on one corpus is never
    served for another, such as a probe's copy with one fact edited."""
    digest = hashlib.sha256()
    for doc_id in sorted(corpus.documents):
        text = corpus.documents[doc_id].text.encode("utf-8", "surrogatepass")
        digest.update(hashlib.sha256(doc_id.encode("utf-8", "surrogatepass")).digest() + hashlib.sha256(text).digest())
    return digest.hexdigest()


def config_key(kind: str, options: dict[str, Any], *, code: dict[str, str] | None = None) -> str:
    """What decides a pipeline's answers, besides the request and the live index, as one digest:
    its kind, its keys but the call policy's, and the digests of its code (`code_digests`)."""
    kept = {k: v for k, v in sorted(options.items()) if k not in POLICY_KEYS and v is not None}
    parts = [kind, kept, sorted((code or {}).items())]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def code_digests(kind: str, options: dict[str, Any], folder: Path | None = None) -> dict[str, str]:
    """The sha256 of each part of a pipeline's code, by what names it: a python pipeline's factory
    module (its folder's files for a package), the arguments of a command that name files
    (beside the config: `folder`), and every file or folder of `code`."""
    from ragaudit.pipelines.python import module_file

    found: dict[str, Path] = {}
    if kind == "python" and options.get("factory"):
        module = module_file(options["factory"], str(folder) if folder else None)
        if module is not None:
            found[f"factory {options['factory']}"] = module
    if kind == "command":
        for argument in options.get("command") or []:
            path = Path(folder or ".") / argument
            if path.is_file():
                found[f"command {argument}"] = path
    for path in options.get("code") or []:
        found[f"code {path}"] = Path(path)
    return {name: _digest(path) for name, path in found.items()}


def _digest(path: Path) -> str:
    """sha256 of a file, or of a folder's files (not the bytecode Python caches beside them)."""
    from ragaudit.io.files import folder_digest, sha256_file

    if not path.is_dir():
        return sha256_file(path)
    inside = (p.relative_to(path) for p in path.rglob("*") if p.is_file())
    names = sorted(n.as_posix() for n in inside if "__pycache__" not in n.parts and n.suffix != ".pyc")
    return folder_digest(path, names).hexdigest()


class CallPolicy:
    """Wraps one pipeline's `run` with the configured limits, retries and cache."""

    def __init__(
        self,
        name: str,
        kind: str,
        options: dict[str, Any],
        *,
        cache_folder: Path | None = None,
        code: dict[str, str] | None = None,
        corpus: str | None = None,
    ):
        """`code`: the digests of the pipeline's code (`code_digests`); `corpus`: the digest of the
        corpus it answers from (`corpus_digest`); both part of every answer's key."""
        self.name = name
        self.retries = int(options.get("retries") or 0)
        self.backoff = float(options.get("retry_backoff_s") or 0.5)
        limit = options.get("max_in_flight")
        self.slots = threading.BoundedSemaphore(limit) if limit else None
        self.limiter = RateLimiter(options["rate_limit"]) if options.get("rate_limit") else None
        self.cache = None
        if options.get("cache"):
            from ragaudit.checks.metrics.embed import cache_dir

            key = config_key(kind, options, code=code)
            self.cache = AnswerCache((cache_folder or cache_dir()) / "answers.sqlite", key, corpus)
        self._jitter = random.Random(f"{name}:backoff")
        self.active = bool(self.retries or self.slots or self.limiter or self.cache)

    def warnings(self) -> list[str]:
        """What went wrong with the answer cache, if anything."""
        return self.cache.warnings() if self.cache is not None else []

    def close(self) -> None:
        if self.cache is not None:
            self.cache.db.close()

    def call(self, run: Callable[[Request], Trace], request: Request, index: LiveIndex | None = None) -> Trace:
        cache = self.cache
        key = cache.key(request, index) if cache else None
        if cache is not None and key is not None and (hit := cache.get(key, request)) is not None:
            return dataclasses.replace(
                hit,
                qid=request.qid,
                variant=request.variant,
                seed=request.seed,
                query=request.query,
                config=self.name,
                file=None,
                line=None,
            )
        errors: list[str] = []
        for attempt in range(self.retries + 1):
            if self.limiter:
                self.limiter.wait()
            if self.slots:
                with self.slots:
                    trace = run(request)
            else:
                trace = run(request)
            if trace.error is None or attempt == self.retries:
                break
            errors.append(trace.error)
            time.sleep(self.backoff * 2**attempt * (1 + self._jitter.random()))
        if errors:
            trace = dataclasses.replace(trace, attempts=len(errors) + 1, retried=tuple(errors))
        if cache is not None and key is not None and trace.error is None:
            cache.put(key, trace)
        return trace
