import copy
import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from helpers import KEYS_SENTENCE, ONCALL, PASSWORDS_SENTENCE, POLICIES, payload_for
from hypothesis import HealthCheck, settings

from ragaudit.io.corpus import load_corpus

# Property tests judge results, never speed: no per-example deadline and no "too slow" health
# check, which a busy machine trips; and the same examples on every run, so a failure is a
# finding that reproduces, not a draw.
settings.register_profile(
    "ragaudit", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("ragaudit")


@pytest.fixture
def corpus_dir(tmp_path) -> Path:
    root = tmp_path / "corpus"
    (root / "team").mkdir(parents=True)
    (root / "policies.md").write_text(POLICIES, encoding="utf-8")
    (root / "team" / "on-call.md").write_text(ONCALL, encoding="utf-8")
    return root


@pytest.fixture
def corpus(corpus_dir):
    return load_corpus(corpus_dir)


@pytest.fixture
def valid_trace(corpus) -> dict:
    """A trace that every rule accepts, against the `corpus` fixture."""
    keys = payload_for(
        corpus,
        "policies",
        KEYS_SENTENCE,
        snippet_id="pol-keys-1",
        section_id="policies/security/keys",
        score=0.9,
        rank=1,
    )
    passwords = payload_for(
        corpus,
        "policies",
        PASSWORDS_SENTENCE,
        snippet_id="pol-pw-1",
        section_id="policies/security/passwords",
        score=0.4,
        rank=2,
    )
    return {
        "schema": "ragaudit.trace/1",
        "qid": "SEC-KEYS-1",
        "variant": 0,
        "seed": 1,
        "query": "How often are hardware keys rotated?",
        "config": "bm25-k5",
        "retriever_name": "bm25",
        "retrieved_at": "2026-11-22T10:00:00Z",
        "index": {
            "index_hash": "sha256:abc",
            "analyzer": "lowercase",
            "embed_model": "all-MiniLM-L6-v2:mean",
            "store": "bm25",
        },
        "retrieved": [keys, passwords],
        "answer": {
            "raw": '{"citations": ["pol-keys-1"], "answer": "Every 12 months."}',
            "text": "Hardware keys are rotated every 12 months [pol-keys-1].",
            "segments": [{"seg": 1, "text": "Hardware keys are rotated every 12 months.", "citations": ["pol-keys-1"]}],
        },
        "error": None,
    }


@pytest.fixture
def mutate(valid_trace):
    def apply(change) -> dict:
        trace = copy.deepcopy(valid_trace)
        change(trace)
        return trace

    return apply


@pytest.fixture(autouse=True, scope="session")
def private_cache(tmp_path_factory, request):
    """Keep every cache the tests make out of the user's cache folder. The embedding vectors alone
    (keyed by the model's digest and the text's sha256, so never stale) are carried from session to
    session in pytest's cache folder: the real-model demo does not embed the handbook again each
    time. Every other cache (answers, audits) starts empty."""
    folder = tmp_path_factory.mktemp("cache")
    os.environ["RAGAUDIT_CACHE"] = str(folder)
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    kept = cache.mkdir("ragaudit") / "embeddings.sqlite" if cache is not None else None
    if kept is not None and kept.is_file():
        _copy_sqlite(kept, folder / "embeddings.sqlite")
    yield folder
    if kept is not None and (folder / "embeddings.sqlite").is_file():
        written = kept.with_name(f"embeddings.{os.getpid()}.tmp")
        _copy_sqlite(folder / "embeddings.sqlite", written)
        os.replace(written, kept)  # whole: another session reading it sees the old file or the new one


def _copy_sqlite(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite file, its write-ahead log included, by SQLite's backup API."""
    with closing(sqlite3.connect(source)) as src, closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> Path:
    """The built-in demo (configs/default.toml) with the real model, run once per session and
    shared by every test that reads it; its run directory."""
    from helpers import ROOT, invoke, run_dir_of

    result = invoke("run", ROOT / "configs" / "default.toml", "--out", tmp_path_factory.mktemp("demo"), "--no-gate")
    assert result.exit_code == 0, result.output
    return run_dir_of(result)


@pytest.fixture(autouse=True, scope="session")
def outside_ci():
    """The suite runs as outside CI wherever it runs, so the commands it invokes show no progress
    (their stderr is not a terminal) and no output it compares depends on how busy the machine is.
    Tests of the progress lines of CI set `CI` themselves."""
    saved = os.environ.pop("CI", None)
    yield
    if saved is not None:
        os.environ["CI"] = saved


@pytest.fixture
def shown_progress(monkeypatch):
    """`show(stream, ci=True, **settings)` sends progress to `stream` for one test, as in CI (`CI`
    set) unless `ci=False`; silent again afterwards."""
    from ragaudit.core import progress

    def show(stream, *, ci: bool = True, **settings):
        if ci:
            monkeypatch.setenv("CI", "true")
        else:
            monkeypatch.delenv("CI", raising=False)
        progress.configure(stream=stream, **settings)
        progress.reset()
        return stream

    yield show
    progress.close()
