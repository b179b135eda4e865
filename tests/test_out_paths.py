"""What an output may replace: a regular file (or nothing), a symlink's target written through, never
a FIFO, a device or a folder; outputs get the umask's mode; an output that is one of the command's
inputs (by any path) is a usage error for every command that writes one."""

import os
import shutil
import stat

import pytest
from helpers import BM25, DEMO, invoke, otlp_line, rag_spans, run_dir_of, span_recorder, write_config  # noqa: E402

from ragaudit.core.errors import InputError  # noqa: E402
from ragaudit.io.files import write_atomic  # noqa: E402


@pytest.fixture
def spans(tmp_path):
    provider, exporter = span_recorder("kb-bot")
    tracer = provider.get_tracer("app")
    for i in range(2):
        rag_spans(tracer, f"q{i}", [{"id": f"d{i}", "content": "Hardware keys."}], f"a{i}")
    path = tmp_path / "spans.jsonl"
    path.write_text(otlp_line(exporter.get_finished_spans()) + "\n")
    return path


@pytest.fixture
def umask():
    """Set the process umask for a test, and put the old one back."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_an_output_through_a_symlink_replaces_its_target_and_keeps_the_link(spans, tmp_path):
    target = tmp_path / "t.jsonl"
    target.write_text("old\n")
    link = tmp_path / "l.jsonl"
    link.symlink_to(target.name)
    result = invoke("ingest", "otlp", spans, "--out", link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == "t.jsonl"
    assert len(target.read_text().splitlines()) == 2 and '"q0"' in target.read_text()
    dangling = tmp_path / "d.jsonl"
    dangling.symlink_to("new.jsonl")  # a symlink to nothing yet: its target is created
    assert invoke("ingest", "otlp", spans, "--out", dangling).exit_code == 0
    assert dangling.is_symlink() and len((tmp_path / "new.jsonl").read_text().splitlines()) == 2
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []


def test_a_fifo_a_device_or_a_folder_is_never_replaced(spans, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result = invoke("ingest", "otlp", spans, "--out", fifo)
    assert result.exit_code == 3
    assert f"error: {fifo}: expected a regular file to write, or none, found a FIFO (named pipe)" in result.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    link = tmp_path / "to-fifo"
    link.symlink_to(fifo)
    through = invoke("ingest", "otlp", spans, "--out", link)
    assert through.exit_code == 3 and f"(the target of the symlink {link})" in through.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink()
    folder = tmp_path / "folder"
    folder.mkdir()
    (tmp_path / "to-folder").symlink_to(folder)
    into = invoke("ingest", "otlp", spans, "--out", tmp_path / "to-folder")
    assert into.exit_code == 3 and into.stderr.endswith(
        f"expected a regular file to write (the target of the symlink {tmp_path / 'to-folder'}), or none, found a folder\n"
    )
    with pytest.raises(InputError, match="found a folder"):
        write_atomic(tmp_path / "to-folder", "x")
    assert folder.is_dir() and not list(folder.iterdir())
    if os.geteuid() == 0:  # only root can make a device node: a copy of /dev/null, never the real one
        device = tmp_path / "null"
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        refused = invoke("ingest", "otlp", spans, "--out", device)
        assert refused.exit_code == 3 and "found a character device" in refused.stderr
        assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_outputs_get_the_mode_the_umask_gives(spans, tmp_path, umask, mask):
    umask(mask)
    out = tmp_path / "traces.jsonl"
    assert invoke("ingest", "otlp", spans, "--out", out).exit_code == 0
    assert mode(out) == 0o666 & ~mask
    out.chmod(0o600)  # an existing file gets the umask's mode too, as a new one would
    assert invoke("ingest", "otlp", spans, "--out", out).exit_code == 0
    assert mode(out) == 0o666 & ~mask
    write_atomic(tmp_path / "x.bin", b"x")
    assert mode(tmp_path / "x.bin") == 0o666 & ~mask


def test_every_file_of_a_run_directory_gets_the_umask_mode(tmp_path, umask):
    umask(0o022)
    config = write_config(tmp_path, BM25, items=1, seeds="[1]")
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    run_dir = run_dir_of(result)
    files = [p for p in run_dir.iterdir() if p.is_file() and not p.name.startswith(".")]
    assert {"report.html", "report.json", "rag_traces.sqlite", "junit.xml", "manifest.json"} <= {p.name for p in files}
    assert {p.name: mode(p) for p in files} == {p.name: 0o644 for p in files}
    assert mode(tmp_path / "runs" / "history.sqlite") == 0o644


def test_ingest_refuses_an_output_that_is_an_input(spans, tmp_path, monkeypatch):
    before = spans.read_bytes()
    (tmp_path / "sub").mkdir()
    link = tmp_path / "link.jsonl"
    link.symlink_to(spans)
    hard = tmp_path / "hard.jsonl"
    os.link(spans, hard)
    monkeypatch.chdir(tmp_path / "sub")
    for out in (spans, "../spans.jsonl", f"../sub/../{spans.name}", link, hard):
        result = invoke("ingest", "otlp", spans, "--out", out)
        assert result.exit_code == 2, (out, result.output)
        assert f"--out {out}: expected an output that is not an input, found the input {spans}" in result.stderr
    assert spans.read_bytes() == before and link.is_symlink()


@pytest.fixture
def finished(tmp_path):
    config = write_config(tmp_path, BM25, items=1, seeds="[1]")
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    return config, run_dir_of(result)


def unchanged(*paths):
    """The bytes of files and the file names of folders, to compare after a command."""
    return {str(p): (sorted(q.name for q in p.iterdir()) if p.is_dir() else p.read_bytes()) for p in paths}


def test_every_command_with_outputs_refuses_one_that_is_an_input(finished, tmp_path, monkeypatch):
    config, run_dir = finished
    gold, report = tmp_path / "gold.jsonl", run_dir / "report.json"
    corpus = tmp_path / "corpus"
    shutil.copytree(DEMO / "corpus", corpus)
    own = tmp_path / "own.toml"
    own.write_text(config.read_text().replace(str(DEMO / "corpus"), str(corpus)))
    before = unchanged(gold, corpus, config, report, run_dir, tmp_path / "runs" / "history.sqlite")

    def refused(*args, option="--out"):
        result = invoke(*args)
        assert result.exit_code == 2, (args, result.output)
        assert f"{option} " in result.stderr and "expected an output that is not an input" in result.stderr
        return result

    refused("run", own, "--out", corpus)  # the run directory would go inside the corpus
    refused("run", own, "--out", corpus / "reports")
    monkeypatch.setenv("RAGAUDIT_HISTORY", str(gold))
    refused("run", own, option="the history")
    monkeypatch.delenv("RAGAUDIT_HISTORY")
    refused(
        "history",
        "--store",
        tmp_path / "runs" / "history.sqlite",
        "--plot",
        tmp_path / "runs" / "history.sqlite",
        option="--plot",
    )
    other = tmp_path / "other"
    other.mkdir()
    (other / "compare.json").symlink_to(report)
    refused("compare", run_dir, "--out", other)
    (other / "faults.json").symlink_to(config)
    refused("faults", run_dir, "--out", other)
    traces = run_dir / "traces.jsonl"
    (other / "audit_log.json").symlink_to(traces)
    refused("audit-log", traces, "--corpus", corpus, "--out", other)
    refused("audit-log", traces, "--corpus", corpus, "--out", corpus / "log")
    assert unchanged(gold, corpus, config, report, run_dir, tmp_path / "runs" / "history.sqlite") == before
    assert sorted(p.name for p in other.iterdir()) == ["audit_log.json", "compare.json", "faults.json"]


def test_refusals_happen_before_any_work(tmp_path):
    """A run that would write into its corpus stops before a run directory is made."""
    config = write_config(tmp_path, BM25, items=1, seeds="[1]")
    corpus = tmp_path / "corpus"
    shutil.copytree(DEMO / "corpus", corpus)
    config.write_text(
        config.read_text().replace(str(DEMO / "corpus"), str(corpus)).replace('out = "runs"', 'out = "corpus/runs"')
    )
    result = invoke("run", config)
    assert result.exit_code == 2
    assert (
        f"[audit] out {corpus / 'runs'}: expected an output that is not an input, found it inside the input "
        f"folder {corpus}" in result.stderr
    )
    assert not (corpus / "runs").exists()


def test_an_output_in_a_folder_that_does_not_exist_names_the_folder(spans, tmp_path):
    result = invoke("ingest", "otlp", spans, "--out", tmp_path / "missing" / "traces.jsonl")
    assert result.exit_code == 3
    assert result.stderr == f"error: {tmp_path / 'missing'}: expected a folder to write traces.jsonl in, found none\n"


def test_every_output_file_that_is_a_folder_is_exit_3_naming_it(finished, spans, tmp_path):
    """A folder cannot be written as a file: the output could not be written (exit 3), as the
    reference says, for every command that writes one file, before it writes anything."""
    config, run_dir = finished
    folder = tmp_path / "a-folder"
    folder.mkdir()
    for args in (
        ("attest", run_dir, "--out", folder),
        ("calibrate", config, "--out", folder),
        ("ingest", "otlp", spans, "--out", folder),
        ("gold", "reanchor", tmp_path / "gold.jsonl", "--corpus", DEMO / "corpus", "--out", folder),
        ("history", "--store", tmp_path / "runs" / "history.sqlite", "--plot", folder),
    ):
        result = invoke(*args)
        assert result.exit_code == 3, (args, result.output)
        assert f"error: {folder}: expected a regular file to write, or none, found a folder" in result.stderr, args
    assert list(folder.iterdir()) == []


def test_no_command_writes_over_a_file_a_run_stamped(finished, spans, tmp_path):
    """A run's manifest, traces and outputs are written by its run alone: every other command's
    output that would replace one (by any path) is a usage error that writes nothing, and the run
    still verifies."""
    config, run_dir = finished
    (tmp_path / "to-report.json").symlink_to(run_dir / "report.json")
    files = sorted(p for p in run_dir.iterdir() if p.is_file())
    before = unchanged(run_dir, *files)
    reanchor = ("gold", "reanchor", tmp_path / "gold.jsonl", "--corpus", DEMO / "corpus")
    for args, stamped in (
        (("ingest", "otlp", spans, "--out", run_dir / "traces.jsonl"), "traces.jsonl"),
        (("calibrate", config, "--out", run_dir / "manifest.json"), "manifest.json"),
        (("calibrate", config, "--out", tmp_path / "to-report.json"), "report.json"),
        ((*reanchor, "--out", run_dir / "summary.md"), "summary.md"),
        (
            ("history", "--store", tmp_path / "runs" / "history.sqlite", "--plot", run_dir / "report.html"),
            "report.html",
        ),
        (("audit-log", run_dir / "traces.jsonl", "--corpus", DEMO / "corpus", "--out", run_dir), "rag_traces.sqlite"),
    ):
        result = invoke(*args)
        assert result.exit_code == 2, (args, result.output)
        assert (
            f"expected an output that is not one of a run's own files, found {run_dir.resolve() / stamped}: only the "
            f"run {run_dir.resolve()} writes it, and its manifest stamps it" in result.stderr
        ), (args, result.stderr)
    assert unchanged(run_dir, *files) == before
    assert invoke("verify", run_dir).exit_code == 0
