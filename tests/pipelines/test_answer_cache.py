"""The answer cache never costs a run: a damaged cache file is set aside beside it (a warning names
both) and a new one is built, a locked or read-only one is left alone, a row that is not a trace
of the query is a miss; in every case the run writes every trace, as it would without a cache."""

import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import contextmanager

import pytest
from helpers import FIXTURES, invoke, run_dir_of, write_config

from ragaudit.io.traces import read_traces

RUNS = 2 * 3  # two questions, three variants, one seed
FILLER = 400  # rows of another pipeline, so the file spans many pages


def cached_config(tmp_path):
    shutil.copy(FIXTURES / "flaky_rag.py", tmp_path / "flaky_rag.py")
    log = tmp_path / "calls.tsv"
    pipeline = (
        '[[pipelines]]\nname = "svc"\nkind = "python"\nfactory = "flaky_rag:make"\ncache = true\n'
        f'options = {{calls = "{log}"}}\n'
    )
    return write_config(tmp_path, pipeline, items=2, seeds="[1]"), log


def calls(log) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def answers(result) -> list:
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    traces = list(read_traces(run_dir_of(result) / "traces.jsonl"))
    assert len(traces) == RUNS and all(t.error is None for t in traces)
    return [(t.qid, t.variant, t.answer.text) for t in traces]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("RAGAUDIT_CACHE", str(folder))
    return folder / "answers.sqlite"


def filled(tmp_path, path):
    """Run once to fill the cache, then add rows of another pipeline; the file, checkpointed
    (no journal beside it), and the first run's answers."""
    config, log = cached_config(tmp_path)
    first = answers(invoke("run", config, "--no-gate"))
    assert calls(log) == RUNS
    db = sqlite3.connect(path)
    db.executemany("INSERT INTO answers VALUES (?, ?)", [(f"other{i}", "x" * 500) for i in range(FILLER)])
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return config, log, first


def set_aside(path) -> list:
    return sorted(p for p in path.parent.iterdir() if p.name.startswith("answers.damaged-"))


def page(path, n: int, size: int = 4096) -> bytes:
    return path.read_bytes()[n * size : (n + 1) * size]


DAMAGE = {
    "not a database": lambda p: p.write_bytes(b"not a database"),
    "truncated to its header": lambda p: p.write_bytes(p.read_bytes()[:100]),
    "truncated by half": lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
    "pages overwritten": lambda p: p.write_bytes(page(p, 0) + os.urandom(len(p.read_bytes()) - 4096)),
    "header overwritten": lambda p: p.write_bytes(b"\xff" * 100 + p.read_bytes()[100:]),
    "a table of another shape": lambda p: _sql(p, "DROP TABLE answers", "CREATE TABLE answers (key TEXT, value TEXT)"),
    "columns of other types": lambda p: _sql(
        p, "DROP TABLE answers", "CREATE TABLE answers (key INTEGER PRIMARY KEY, trace BLOB)"
    ),
    "a folder in its place": lambda p: (p.unlink(), p.mkdir(), (p / "x").write_text("x")),
}


def _sql(path, *statements):
    db = sqlite3.connect(path)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_cache_is_set_aside_and_rebuilt_and_the_run_loses_nothing(tmp_path, cache, damage):
    config, log, first = filled(tmp_path, cache)
    DAMAGE[damage](cache)
    before = cache.read_bytes() if cache.is_file() else None
    result = invoke("run", config, "--no-gate")
    assert answers(result) == first
    assert calls(log) == 2 * RUNS  # nothing could be found: every run was called again
    [aside] = set_aside(cache)
    assert aside.parent == cache.parent and (aside.read_bytes() == before if before is not None else aside.is_dir())
    assert f"warning: answer cache {cache} was damaged (" in result.stderr
    assert f"set aside as {aside}, a new one is built" in result.stderr
    assert answers(invoke("run", config, "--no-gate")) == first
    assert calls(log) == 2 * RUNS  # the new cache holds every answer


def test_a_cache_damaged_before_it_was_ever_filled_is_replaced(tmp_path, cache):
    config, log = cached_config(tmp_path)
    cache.parent.mkdir()
    cache.write_bytes(b"SQLite format 3\x00" + os.urandom(3000))
    first = answers(result := invoke("run", config, "--no-gate"))
    assert len(set_aside(cache)) == 1 and "was damaged" in result.stderr
    assert answers(invoke("run", config, "--no-gate")) == first and calls(log) == RUNS


def test_an_empty_file_is_an_empty_cache(tmp_path, cache):
    config, log = cached_config(tmp_path)
    cache.parent.mkdir()
    cache.write_bytes(b"")
    first = invoke("run", config, "--no-gate")
    assert answers(invoke("run", config, "--no-gate")) == answers(first)
    assert calls(log) == RUNS and not set_aside(cache) and "warning: answer cache" not in first.stderr


GARBAGE = ["not json", 42, b"\x00\xff", "{}", "[]", '{"qid": "x"}', "null", '"a string"']


def test_rows_that_are_not_traces_of_the_query_are_misses(tmp_path, cache):
    config, log, first = filled(tmp_path, cache)
    db = sqlite3.connect(cache)
    keys = [k for (k,) in db.execute("SELECT key FROM answers WHERE key NOT LIKE 'other%' ORDER BY key")]
    assert len(keys) == RUNS
    for i, key in enumerate(keys[:-1]):
        db.execute("UPDATE answers SET trace = ? WHERE key = ?", (GARBAGE[i % len(GARBAGE)], key))
    # the last: a real trace, but of another query (a row under the wrong key)
    (other,) = db.execute("SELECT trace FROM answers WHERE key = ?", (keys[0],)).fetchone()
    (last,) = db.execute("SELECT trace FROM answers WHERE key = ?", (keys[-1],)).fetchone()
    db.execute("UPDATE answers SET trace = ? WHERE key = ?", (last.replace('"query":"', '"query":"not '), keys[-1]))
    db.commit()
    db.close()
    assert other is not None
    result = invoke("run", config, "--no-gate")
    assert answers(result) == first and calls(log) == 2 * RUNS  # each damaged row was called again
    assert not set_aside(cache) and "warning: answer cache" not in result.stderr
    assert answers(invoke("run", config, "--no-gate")) == first and calls(log) == 2 * RUNS  # and replaced


HOLD = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA journal_mode=" + sys.argv[2])
if sys.argv[2] == "DELETE":
    db.execute("PRAGMA locking_mode=EXCLUSIVE")
db.execute("BEGIN EXCLUSIVE")
db.execute("INSERT OR REPLACE INTO answers VALUES ('held', 'held')")
print("locked", flush=True)
time.sleep(120)
"""


@contextmanager
def locked(path, mode):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path), mode], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.kill()
        holder.wait()


def test_a_cache_locked_by_another_process_is_left_alone(tmp_path, cache):
    config, log, first = filled(tmp_path, cache)
    with locked(cache, "DELETE"):  # nobody else may even read it
        result = invoke("run", config, "--no-gate")
    assert answers(result) == first and calls(log) == 2 * RUNS
    assert (
        f"warning: answer cache {cache} is not used in this run: another process holds it (database is locked)"
        in result.stderr
    )
    assert not set_aside(cache)
    db = sqlite3.connect(cache)
    assert db.execute("SELECT count(*) FROM answers").fetchone() == (RUNS + FILLER,)  # the holder's row rolled back


def test_a_cache_another_process_is_writing_is_read_but_not_written(tmp_path, cache):
    config, log, first = filled(tmp_path, cache)
    _sql(cache, "DELETE FROM answers WHERE key NOT LIKE 'other%' AND rowid % 2 = 0")  # some answers missing
    kept = sqlite3.connect(cache).execute("SELECT count(*) FROM answers WHERE key NOT LIKE 'other%'").fetchone()[0]
    assert 0 < kept < RUNS
    with locked(cache, "WAL"):  # readers go on, writers wait
        result = invoke("run", config, "--no-gate")
    assert answers(result) == first and calls(log) == RUNS + (RUNS - kept)  # what it held was used
    assert f"warning: answer cache {cache} cannot be written (database is locked)" in result.stderr
    assert not set_aside(cache)


@contextmanager
def read_only(path):
    """`path` made read-only: immutable for root (whom file modes do not stop), else mode 0444."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)]).returncode != 0:
            pytest.skip("this file system cannot make a file read-only for root (chattr +i)")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(0o644)


def test_a_read_only_cache_is_read_and_left_as_it_is(tmp_path, cache):
    config, log, first = filled(tmp_path, cache)
    _sql(cache, "DELETE FROM answers WHERE key NOT LIKE 'other%' AND rowid % 2 = 0")
    before = cache.read_bytes()
    with read_only(cache):
        result = invoke("run", config, "--no-gate")
        assert answers(result) == first
        assert calls(log) < 2 * RUNS  # what it held was used
        assert f"warning: answer cache {cache} cannot be written" in result.stderr
    assert cache.read_bytes() == before and not set_aside(cache)


def test_a_cache_that_cannot_be_made_is_not_used(tmp_path):
    from ragaudit.io.cachedb import CacheDB

    (tmp_path / "cache").write_text("a file where the cache folder goes")
    path = tmp_path / "cache" / "answers.sqlite"
    db = CacheDB(path, {"answers": "key TEXT PRIMARY KEY, trace TEXT"}, what="answer cache")
    assert db.read("SELECT trace FROM answers", ()) == []
    db.write("INSERT INTO answers VALUES (?, ?)", [("a", "1")])  # nothing, and no error
    assert db.warnings == [f"answer cache {path} is not used in this run: {path.parent}: File exists"]


def test_a_cache_damaged_while_in_use_is_set_aside_and_the_lookups_miss(tmp_path):
    from ragaudit.io.cachedb import CacheDB

    path = tmp_path / "answers.sqlite"
    db = CacheDB(path, {"answers": "key TEXT PRIMARY KEY, trace TEXT"}, what="answer cache")
    db.write("INSERT INTO answers VALUES (?, ?)", [("a", "1"), ("b", "2")])
    assert db.read("SELECT trace FROM answers WHERE key = ?", ("a",)) == [("1",)]
    _sql(path, "DROP TABLE answers", "CREATE TABLE answers (k TEXT, v TEXT)")  # by another program
    assert db.read("SELECT trace FROM answers WHERE key = ?", ("a",)) == []
    [aside] = set_aside(path)
    assert db.warnings == [
        f"answer cache {path} was damaged (no such column: trace): set aside as {aside}, a new one is built"
    ]
    db.write("INSERT INTO answers VALUES (?, ?)", [("c", "3")])
    assert db.read("SELECT key, trace FROM answers", ()) == [("c", "3")]
    db.close()


RAG = """
from pathlib import Path

ANSWER = {answer!r}


class Rag:
    def index_info(self):
        return {{"index_hash": "sha256:same", "analyzer": "lowercase", "embed_model": "none", "store": "x"}}

    def run(self, query, *, seed, k):
        here = Path(__file__).parent
        with open(here / "calls.tsv", "a") as out:
            out.write(query + "\\n")
        prompt = (here / "prompts" / "answer.txt").read_text().strip()
        return {{"retrieved": [], "answer": {{"text": prompt + " " + ANSWER}}}}


def make():
    return Rag()
"""


def test_the_answer_cache_keys_on_the_pipelines_code(tmp_path, cache, monkeypatch):
    """Answers given by buggy code are not replayed once the code is fixed: the key holds the
    digest of the factory's module and of the files and folders the config lists under `code`."""
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "answer.txt").write_text("Answer:")
    module = tmp_path / "code_rag.py"
    pipeline = (
        '[[pipelines]]\nname = "svc"\nkind = "python"\nfactory = "code_rag:make"\ncache = true\ncode = ["prompts"]\n'
    )
    config = write_config(tmp_path, pipeline, items=2, seeds="[1]")
    log = tmp_path / "calls.tsv"

    def run(answer: str) -> list:
        module.write_text(RAG.format(answer=answer))
        monkeypatch.delitem(sys.modules, "code_rag", raising=False)  # a new ragaudit process imports it anew
        return [text for _, _, text in answers(invoke("run", config, "--no-gate"))]

    assert run("The fluctuation reservoir.") == ["Answer: The fluctuation reservoir."] * RUNS
    assert calls(log) == RUNS
    assert run("The fluctuation reservoir.") == ["Answer: The fluctuation reservoir."] * RUNS
    assert calls(log) == RUNS  # unchanged: every answer from the cache
    assert run("Every 12 months.") == ["Answer: Every 12 months."] * RUNS  # the fix is called, not replayed
    assert calls(log) == 2 * RUNS
    (tmp_path / "prompts" / "answer.txt").write_text("In short:")
    assert run("Every 12 months.") == ["In short: Every 12 months."] * RUNS  # a listed file changed
    assert calls(log) == 3 * RUNS
    (tmp_path / "prompts" / "__pycache__").mkdir()
    (tmp_path / "prompts" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert run("Every 12 months.") == ["In short: Every 12 months."] * RUNS  # bytecode is not code
    assert calls(log) == 3 * RUNS


def test_code_names_existing_files_and_a_command_keys_on_the_files_it_names(tmp_path):
    from ragaudit.pipelines.calls import code_digests

    (tmp_path / "serve.py").write_text("print('v1')\n")
    command = {"command": ["python", "serve.py", "--fast"]}
    first = code_digests("command", command, tmp_path)
    assert list(first) == ["command serve.py"]  # `python` and `--fast` name no file beside the config
    (tmp_path / "serve.py").write_text("print('v2')\n")
    assert code_digests("command", command, tmp_path) != first

    pipeline = '[[pipelines]]\nname = "svc"\nkind = "python"\nfactory = "code_rag:make"\ncode = ["prompts", "x.txt"]\n'
    result = invoke("run", write_config(tmp_path, pipeline, items=1, seeds="[1]"))
    assert result.exit_code == 3
    assert "$.pipelines[0].code[0]: expected an existing file or folder, found" in result.output
    assert "prompts" in result.output and "which does not exist" in result.output
