"""`ragaudit probe`: does an answer follow its source? Corpus copies with the anchor's key fact edited,
each pipeline re-pointed, the answers classified; the exclusion probe; the ledger that survives a
kill; the answer cache keyed on the corpus; the user's corpus never written."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import DEMO, FIXTURES, REFERENCE, ROOT, backticked, invoke, markdown_table

from ragaudit.checks.metrics import faithful as outcomes
from ragaudit.checks.metrics.keycontent import key_content
from ragaudit.core.types import Answer, Offsets, Payload, Segment, Trace
from ragaudit.flows.probing.classify import classify, states_fact, still_states
from ragaudit.flows.probing.edits import KINDS, Cannot, catalog, make_edit
from ragaudit.io.corpus import load_corpus
from ragaudit.io.gold import read_gold
from ragaudit.pipelines.base import Request
from ragaudit.pipelines.calls import AnswerCache, corpus_digest

# PWD-REQ-1: a number and a verb; MFA-1: no quantity; MFA-2: a name and a negation; INC-SEV1-1: a
# number and a name; MON-ALERT-1: no auxiliary verb to negate
QIDS = ["PWD-REQ-1", "MFA-1", "MFA-2", "INC-SEV1-1", "MON-ALERT-1"]
GOLD = {json.loads(line)["qid"]: line for line in (DEMO / "gold.jsonl").read_text(encoding="utf-8").splitlines()}


def corpus_sha(folder: Path) -> str:
    """Every file below the folder, by name and bytes (a symlink read through)."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def user_corpus(tmp_path: Path) -> Path:
    """The handbook, its security policy a symlink to a file kept elsewhere in the folder (under a
    name that is no document's)."""
    corpus = tmp_path / "corpus"
    shutil.copytree(DEMO / "corpus", corpus)
    (corpus / "store").mkdir()
    (corpus / "security-policy.md").rename(corpus / "store" / "policy.markdown")
    (corpus / "security-policy.md").symlink_to(corpus / "store" / "policy.markdown")
    return corpus


def probe_config(tmp_path: Path, pipelines: str, *, qids=QIDS, seeds="[1]", gate="", corpus=None) -> Path:
    shutil.copy(FIXTURES / "probe_rag.py", tmp_path / "probe_rag.py")
    (tmp_path / "gold.jsonl").write_text("".join(GOLD[q] + "\n" for q in qids), encoding="utf-8")
    config = tmp_path / "probe.toml"
    config.write_text(
        f'[audit]\ngold = "gold.jsonl"\ncorpus = "{corpus or DEMO / "corpus"}"\nparaphrases = 1\nseeds = {seeds}\n'
        f'out = "runs"\n\n[embedder]\nmodel = "hashing"\n\n{gate}\n{pipelines}',
        encoding="utf-8",
    )
    return config


BM25 = '[[pipelines]]\nname = "bm25"\nkind = "reference"\nretriever = "bm25"\n'
PARAMETRIC = '[[pipelines]]\nname = "parametric"\nkind = "python"\nfactory = "probe_rag:parametric"\noptions = {{ gold = "{gold}" }}\n'


def report_of(tmp_path: Path) -> tuple[Path, dict]:
    [folder] = sorted((tmp_path / "runs").glob("probe-*"))
    return folder, json.loads((folder / "report.json").read_text(encoding="utf-8"))


def test_the_extractive_pipeline_follows_every_edit_and_the_parametric_one_none(tmp_path):
    corpus = user_corpus(tmp_path)
    before = corpus_sha(corpus)
    pipelines = BM25 + PARAMETRIC.format(gold=tmp_path / "gold.jsonl")
    pipelines += f'[[pipelines]]\nname = "crashing"\nkind = "python"\nfactory = "probe_rag:crashing"\noptions = {{ real = "{corpus}" }}\n'
    pipelines += f'[[pipelines]]\nname = "unpointed"\nkind = "python"\nfactory = "probe_rag:unpointed"\noptions = {{ corpus = "{corpus}" }}\n'
    config = probe_config(tmp_path, pipelines, gate="[gate]\nfaithful_min = 0.9\n", corpus=corpus)
    result = invoke("probe", config)
    assert result.exit_code == 1, result.output  # the parametric answerer fails faithful_min
    assert corpus_sha(corpus) == before  # the user's corpus is only read
    assert (corpus / "security-policy.md").is_symlink()
    folder, report = report_of(tmp_path)
    probe = report["meta"]["probe"]
    found = {name: p["faithful"] for name, p in probe["pipelines"].items()}
    # edits that can be made on these anchors, counted by hand: PWD-REQ-1 number + negation, MFA-1
    # negation, MFA-2 entity + negation (it drops "not"), INC-SEV1-1 number + entity (PagerDuty),
    # MON-ALERT-1 number
    assert found["bm25"]["units"] == 8 and found["bm25"]["rate"] == 1.0
    assert found["bm25"]["counts"] == {"follows": 8} and found["bm25"]["left_out"] == 0
    assert found["parametric"]["rate"] == 0.0 and found["parametric"]["counts"] == {"keeps_old": 8}
    low, high = found["bm25"]["ci95"]
    assert 0.6 < low < 1.0 == high and found["parametric"]["ci95"][0] == 0.0
    assert found["crashing"]["counts"] == {"other": 8}
    assert probe["pipelines"]["unpointed"]["skipped"].startswith(
        "its factory 'probe_rag:unpointed' declares no corpus_path"
    )
    # per question: the edit and the answers before and after
    [pwd] = [e for e in probe["edits"] if (e["pipeline"], e["qid"], e["kind"]) == ("bm25", "PWD-REQ-1", "number")]
    new = pwd["edit"]["new"]
    assert (
        pwd["edit"]["old"] == "14" and new != "14" and pwd["edit"]["edited"] == pwd["edit"]["anchor"].replace("14", new)
    )
    [run] = pwd["runs"]
    assert "14 characters" in run["before"] and f"{new} characters" in run["answer"] and run["outcome"] == "follows"
    [crash] = [e for e in probe["edits"] if (e["pipeline"], e["qid"], e["kind"]) == ("crashing", "PWD-REQ-1", "number")]
    assert "could not start on the edited copy" in crash["runs"][0]["why"]
    cannot = {(c["qid"], c["kind"]): c["why"] for c in probe["cannot"]}
    assert cannot[("MFA-1", "number")] == "the anchor states no quantity in digits"
    assert cannot[("MON-ALERT-1", "negation")].startswith("the anchor has no auxiliary or modal verb")
    # the report: faithful per question and pipeline, gated by faithful_min alone
    rows = {(q["pipeline"], q["qid"]): q["metrics"].get("faithful") for q in report["questions"]}
    assert rows[("bm25", "MFA-2")] == 1.0 and rows[("parametric", "MFA-2")] == 0.0
    assert report["summary"]["pipelines"]["bm25"]["metrics"]["faithful"] == 1.0
    checks = {c["pipeline"]: c for c in report["gate"]["checks"]}
    assert {c["name"] for c in report["gate"]["checks"]} == {"faithful_min"}
    assert checks["bm25"]["passed"] and not checks["parametric"]["passed"] and not checks["unpointed"]["passed"]
    assert "not probed" in checks["unpointed"]["detail"]
    # cost: per pipeline one build for the real corpus, one per edit, one per exclusion; a call per run
    cost = probe["pipelines"]["bm25"]["cost"]
    exclusions = len([e for e in probe["exclusions"] if e["pipeline"] == "bm25"])
    assert exclusions == 4  # the anchors with a quantity or a name: all but MFA-1
    assert cost == {"index_builds": 1 + 8 + exclusions, "calls": 5 + 8 + exclusions}
    # the exclusion probe: without its section, the extractive answer no longer states the fact;
    # the parametric one still does
    assert probe["pipelines"]["bm25"]["necessary"]["rate"] == 1.0
    assert probe["pipelines"]["parametric"]["necessary"]["rate"] == 0.0
    assert "bm25: faithful 1.000" in result.output and "parametric: faithful 0.000" in result.output
    assert not list(folder.glob(".copy-*"))  # copies are removed once used


def test_compare_compares_faithful_like_any_rate(tmp_path):
    config = probe_config(tmp_path, BM25 + PARAMETRIC.format(gold=tmp_path / "gold.jsonl"))
    assert invoke("probe", config).exit_code == 0  # faithful_min not set: nothing gated
    folder, _ = report_of(tmp_path)
    result = invoke("compare", folder, "--pair", "parametric:bm25", "--format", "json")
    assert result.exit_code == 0, result.output
    faithful = json.loads(result.output)["pairs"][0]["metrics"]["faithful"]
    assert (faithful["mean_a"], faithful["mean_b"], faithful["wins"]) == (0.0, 1.0, 5)
    assert faithful["test"] == "sign test, exact"  # a per-run 0/1 outcome
    gated = invoke("gate", folder / "report.json", "--config", config, "--format", "json")
    assert gated.exit_code in (0, 1)  # every check of [gate] applies to a probe's report as to a run's


def test_a_command_pipeline_answers_from_the_corpus_its_request_names(tmp_path):
    program = tmp_path / "reindexing.py"
    program.write_text(
        "import json, sys\n"
        "from ragaudit.io.corpus import load_corpus\n"
        "from ragaudit.io.traces import trace_to_dict\n"
        "from ragaudit.pipelines.base import Request\n"
        "from ragaudit.pipelines.reference import ReferencePipeline\n"
        "built = {}\n"
        "for line in sys.stdin:\n"
        "    r = json.loads(line)\n"
        "    key = (r['corpus'], tuple((e['doc_id'], e['section_id']) for e in r['exclude']))\n"
        "    if key not in built:\n"
        "        built.clear()\n"
        "        built[key] = ReferencePipeline('cli', load_corpus(r['corpus']), exclude=key[1])\n"
        "    trace = built[key].run(Request(r['qid'], r['variant'], r['seed'], r['query'], r['k']))\n"
        "    print(json.dumps(trace_to_dict(trace)), flush=True)\n",
        encoding="utf-8",
    )
    ignoring = tmp_path / "ignoring.py"
    ignoring.write_text(
        program.read_text().replace("load_corpus(r['corpus'])", f"load_corpus({str(DEMO / 'corpus')!r})"),
        encoding="utf-8",
    )
    pipelines = "".join(
        f'[[pipelines]]\nname = "{name}"\nkind = "command"\ncommand = ["{sys.executable}", "{path.name}"]\n'
        for name, path in (("reading", program), ("ignoring", ignoring))
    )
    config = probe_config(tmp_path, pipelines, qids=["PWD-REQ-1", "KEYS-ENC-2"])
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        result = invoke("probe", config)
    assert result.exit_code == 0, result.output
    _, report = report_of(tmp_path)
    probe = report["meta"]["probe"]["pipelines"]
    assert probe["reading"]["faithful"]["rate"] == 1.0 and probe["reading"]["necessary"]["rate"] == 1.0
    assert probe["ignoring"]["skipped"] is not None and "does not read `corpus`" in probe["ignoring"]["skipped"]
    assert probe["ignoring"]["faithful"]["rate"] is None


def test_the_answer_cache_never_serves_a_probe_an_answer_given_on_the_real_corpus(tmp_path, monkeypatch):
    """A pipeline whose live index does not change with the corpus, its answers cached: the runs on
    the real corpus fill the cache, and only the corpus digest in the key keeps the runs on an
    edited copy (the same query, seed, k and index) from being served those answers."""
    monkeypatch.setenv("RAGAUDIT_CACHE", str(tmp_path / "cache"))
    pipeline = '[[pipelines]]\nname = "cached"\nkind = "python"\nfactory = "probe_rag:constant"\ncache = true\n'
    config = probe_config(tmp_path, pipeline, qids=["PWD-REQ-1", "BK-RET-3"], gate="[gate]\nfaithful_min = 1.0\n")
    result = invoke("probe", config, "--edits", "number,negation")
    assert result.exit_code == 0, result.output
    _, report = report_of(tmp_path)
    assert report["meta"]["probe"]["pipelines"]["cached"]["faithful"]["counts"] == {"follows": 4}
    request = Request("q", 0, 1, "How long?", 5)
    real = AnswerCache(tmp_path / "keys.sqlite", "config", corpus_digest(load_corpus(DEMO / "corpus")))
    edited = AnswerCache(tmp_path / "keys.sqlite", "config", "another corpus")
    assert real.key(request, None) != edited.key(request, None)
    real.db.close()
    edited.db.close()


def test_a_killed_probe_resumes_and_loses_nothing(tmp_path):
    pipeline = (
        '[[pipelines]]\nname = "slow"\nkind = "python"\nfactory = "probe_rag:reading"\noptions = { delay = 0.3 }\n'
    )
    config = probe_config(tmp_path, pipeline)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)]), "HF_HUB_OFFLINE": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "ragaudit", "-q", "probe", str(config)], cwd=tmp_path, env=env, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    ledger = None
    while time.monotonic() < deadline:
        found = sorted((tmp_path / "runs").glob("probe-*/probe.jsonl"))
        if found and len(found[0].read_text(encoding="utf-8").splitlines()) >= 8:
            ledger = found[0]
            break
        time.sleep(0.05)
    assert ledger is not None, "the probe wrote no work"
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 143, err.decode()
    assert b"--resume" in err
    kept = ledger.read_text(encoding="utf-8").splitlines()
    assert not (ledger.parent / "report.json").exists()
    resumed = invoke("probe", config, "--resume", ledger.parent)
    assert resumed.exit_code == 0, resumed.output
    lines = ledger.read_text(encoding="utf-8").splitlines()
    assert lines[: len(kept)] == kept  # nothing kept was lost or rewritten
    finished = [json.loads(line) for line in lines[1:]]
    keys = [(r["record"], r.get("pipeline"), r.get("qid"), r.get("kind")) for r in finished]
    assert len(keys) == len(set(keys))  # nothing done twice
    # the same findings as a probe never stopped
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    again = probe_config(fresh, pipeline)
    assert invoke("probe", again).exit_code == 0
    _, whole = report_of(fresh)
    _, stopped = report_of(tmp_path)
    for report in (whole, stopped):
        for p in report["meta"]["probe"]["pipelines"].values():
            p.pop("cost")
    assert stopped["meta"]["probe"] == whole["meta"]["probe"]
    assert (
        invoke("probe", config, "--resume", ledger.parent, "--edits", "number").exit_code == 2
    )  # not what it started with


def test_a_pipeline_failing_on_the_copies_is_reported_per_question_and_fails_the_gate(tmp_path):
    corpus = user_corpus(tmp_path)
    pipelines = "".join(
        f'[[pipelines]]\nname = "{name}"\nkind = "python"\nfactory = "probe_rag:{name}"\noptions = {{ real = "{corpus}" }}\n'
        for name in ("crashing", "breaking")
    )
    qids = ["PWD-REQ-1", "INC-SEV1-1"]  # edits by hand: PWD-REQ-1 number + negation, INC-SEV1-1 number + entity
    config = probe_config(tmp_path, pipelines, qids=qids, gate="[gate]\nfaithful_min = 0.5\n", corpus=corpus)
    result = invoke("probe", config)
    assert result.exit_code == 1, result.output  # every run on a copy failed: faithful 0 < 0.5
    _, report = report_of(tmp_path)
    probe = report["meta"]["probe"]
    for name, why in (
        ("crashing", "it could not start on the edited copy: "),
        ("breaking", "errored: "),
    ):
        found = probe["pipelines"][name]
        assert found["skipped"] is None and found["faithful"]["rate"] == 0.0
        assert found["faithful"]["counts"] == {"other": 4} and found["faithful"]["left_out"] == 0
        edits = [e for e in probe["edits"] if e["pipeline"] == name]
        assert sorted((e["qid"], e["kind"]) for e in edits) == [
            ("INC-SEV1-1", "entity"),
            ("INC-SEV1-1", "number"),
            ("PWD-REQ-1", "negation"),
            ("PWD-REQ-1", "number"),
        ]
        for e in edits:
            [run] = e["runs"]
            assert run["outcome"] == "other" and why in run["why"] and run["answer"] is None
            assert run["before"] and run["stated_before"]  # its answers on the real corpus are kept
    causes = {e["pipeline"]: e["runs"][0]["why"] for e in probe["edits"]}
    assert "RuntimeError: cannot open the vector store for " in causes["crashing"]  # the cause, not cut off
    assert causes["breaking"].endswith("ConnectionError: the vector store closed the connection")
    checks = {c["pipeline"]: c for c in report["gate"]["checks"]}
    assert not checks["crashing"]["passed"] and not checks["breaking"]["passed"]
    assert "[gate] breaking faithful_min FAIL: 0.000 >= 0.5" in result.output
    assert "breaking: faithful 0.000" in result.output and "other: errored: " in result.output
    # no gate: reported the same, exit 0
    config.write_text(config.read_text(encoding="utf-8").replace("faithful_min = 0.5", ""), encoding="utf-8")
    again = invoke("probe", config, "--only", "breaking")
    assert again.exit_code == 0, again.output
    assert "breaking: faithful 0.000" in again.output and "[gate] faithful_min not set" in again.output


def test_a_pipeline_that_cannot_start_on_the_real_corpus_exits_4(tmp_path):
    pipeline = '[[pipelines]]\nname = "broken"\nkind = "python"\nfactory = "probe_rag:broken"\n'
    result = invoke("probe", probe_config(tmp_path, pipeline, qids=["PWD-REQ-1"]))
    assert result.exit_code == 4, result.output
    assert "broken" in result.output and "no vector store for" in result.output
    [folder] = sorted((tmp_path / "runs").glob("probe-*"))
    assert not (folder / "report.json").exists()


def test_a_probe_killed_with_sigkill_resumes_from_its_ledger(tmp_path):
    """No handler runs on SIGKILL: the ledger's finished lines are all there is, a copy is left
    behind, and the last line may be torn. Resumed, the probe finds what a whole probe finds."""
    pipeline = (
        '[[pipelines]]\nname = "slow"\nkind = "python"\nfactory = "probe_rag:reading"\noptions = { delay = 0.3 }\n'
    )
    config = probe_config(tmp_path, pipeline)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)]), "HF_HUB_OFFLINE": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "ragaudit", "-q", "probe", str(config)], cwd=tmp_path, env=env, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    ledger = None
    while time.monotonic() < deadline:  # the runs on the real corpus (5) and some edits done
        found = sorted((tmp_path / "runs").glob("probe-*/probe.jsonl"))
        if found and len(found[0].read_text(encoding="utf-8").splitlines()) >= 16:
            ledger = found[0]
            break
        time.sleep(0.05)
    assert ledger is not None, "the probe wrote no work"
    child.kill()
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    kept = ledger.read_text(encoding="utf-8").splitlines()
    with open(ledger, "a", encoding="utf-8") as torn:
        torn.write('{"record": "edit", "pipeline": "slow", "qid": "MF')  # a line cut off mid-write
    resumed = invoke("probe", config, "--resume", ledger.parent)
    assert resumed.exit_code == 0, resumed.output
    lines = ledger.read_text(encoding="utf-8").splitlines()
    assert lines[: len(kept)] == kept and len(lines) > len(kept)
    records = [json.loads(line) for line in lines[1:]]
    keys = [(r["record"], r.get("pipeline"), r.get("qid"), r.get("kind")) for r in records]
    assert len(keys) == len(set(keys))  # nothing done twice
    # counted by hand (as in the first test): 5 questions asked on the real corpus, 8 edits made,
    # 7 that cannot be, 4 anchors with a quantity or a name to leave out
    kinds = [k[0] for k in keys]
    assert (kinds.count("before"), kinds.count("edit"), kinds.count("cannot"), kinds.count("exclude")) == (5, 8, 7, 4)
    probe = json.loads((ledger.parent / "report.json").read_text(encoding="utf-8"))["meta"]["probe"]
    assert probe["pipelines"]["slow"]["faithful"]["counts"] == {"follows": 8}
    assert probe["pipelines"]["slow"]["necessary"]["units"] == 4
    assert not list(ledger.parent.glob(".copy-*"))  # the copy the killed probe left is removed


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--edits", "number,date"], "--edits: expected names of number, entity, negation, found 'date'"),
        (["--only", "dense"], "--only: expected names of bm25, found 'dense'"),
    ],
)
def test_unknown_names_are_usage_errors(tmp_path, args, said):
    result = invoke("probe", probe_config(tmp_path, BM25), *args)
    assert result.exit_code == 2 and said in result.output
    assert not (tmp_path / "runs").exists()


# ---- edits and outcomes, by hand -------------------------------------------------------------------


@pytest.fixture(scope="module")
def handbook():
    corpus = load_corpus(DEMO / "corpus")
    items, _ = read_gold(DEMO / "gold.jsonl")
    return corpus, {i.qid: i for i in items}, catalog(corpus)


def test_each_edit_changes_the_key_fact(handbook):
    corpus, items, names = handbook
    number = make_edit("number", items["BK-RET-3"], corpus, names)
    assert number.old == "13" and number.edited == f"Monthly database backups are retained for {number.new} months."
    assert number.new not in corpus["backups"].text.replace(number.old, "")  # a value the document never has
    negation = make_edit("negation", items["BK-RET-3"], corpus, names)
    assert negation.edited == "Monthly database backups are not retained for 13 months."
    dropped = make_edit("negation", items["MFA-2"], corpus, names)
    assert dropped.edited.endswith("SMS codes are accepted as a second factor.")
    relative = make_edit("negation", items["AR-PRIV-3"], corpus, names)  # not the relative clause's "is"
    assert relative.edited == "Privileged access that is unused for 30 days is not revoked automatically."
    entity = make_edit("entity", items["INC-SEV1-1"], corpus, names)
    assert entity.old == "PagerDuty" and entity.new[0].isupper() and " " not in entity.new
    assert entity.new.lower() not in corpus["incident-response"].text.lower()
    # a name its document writes elsewhere too would leave the old fact in the copy: not edited
    assert isinstance(make_edit("entity", items["KEYS-ENC-2"], corpus, names), Cannot)
    assert isinstance(make_edit("entity", items["PWD-REQ-1"], corpus, names), Cannot)
    assert isinstance(make_edit("number", items["MFA-1"], corpus, names), Cannot)


def run_of(answer: str, cited: str, start: int, end: int, doc_id: str = "backups") -> Trace:
    payload = Payload(
        doc_id=doc_id,
        section_id="s",
        snippet_id=cited,
        source_url="u",
        offsets=Offsets(start, end, "char"),
        tokens=1,
        index_hash="h",
        embed_model="none",
        analyzer="lowercase",
        rev="r",
        score_norm=1.0,
        k_pos=1,
    )
    segments = (Segment(1, answer, (cited,)),)
    return Trace("BK-RET-3", 0, 1, retrieved=(payload,), answer=Answer(text=answer, segments=segments))


@pytest.mark.parametrize(
    ("kind", "answer", "expected"),
    [
        ("number", "Monthly backups are kept for {new} months.", "follows"),
        ("number", "Kept for {new}.", "follows"),  # a bare value, as a short answer gives it
        ("number", "Monthly database backups are retained for 13 months.", "keeps_old"),
        ("number", "Monthly database backups are retained for one year.", "other"),  # 12 months, not 13
        ("number", "Weekly backups are retained for 12 weeks.", "other"),
        ("negation", "Monthly database backups are not retained for 13 months.", "follows"),
        ("negation", "Monthly database backups are retained for 13 months.", "keeps_old"),
        ("negation", "Daily backups are retained for 35 days.", "other"),
    ],
)
def test_an_answer_follows_keeps_the_old_fact_or_neither(handbook, kind, answer, expected):
    corpus, items, names = handbook
    edit = make_edit(kind, items["BK-RET-3"], corpus, names)
    text = answer.format(new=edit.new)
    got = classify(edit, run_of(text, "backups:0002", edit.start, edit.end), None)
    assert got.outcome == expected, got.why


def test_the_edited_fact_citing_another_passage_does_not_follow(handbook):
    corpus, items, names = handbook
    edit = make_edit("number", items["BK-RET-3"], corpus, names)
    got = classify(edit, run_of(f"Kept for {edit.new} months.", "backups:0009", edit.end + 50, edit.end + 90), None)
    assert got.outcome == "other" and "not the edited passage" in got.why
    errored = classify(edit, Trace("BK-RET-3", 0, 1, error="boom"), None)
    assert (errored.outcome, errored.why) == ("other", "errored: boom")
    gone = still_states(edit, run_of("Monthly backups are kept for 13 months.", "backups:0001", 0, 10))
    assert gone.outcome == "unnecessary"


@pytest.mark.parametrize(
    ("answer", "stated"),
    [
        ("Hardware keys are shipped only to the employee's registered home address.", True),
        ("Only to the employee's registered home address.", True),
        # the statement's subject, verb and polarity, not its fact: of such an answer the probe cannot
        # tell whether it follows its source, and it is left out
        ("Hardware keys are shipped to the IT help desk.", False),
        ("Hardware keys are not shipped to the employee's registered home address.", False),
    ],
)
def test_a_negation_counts_only_answers_that_stated_the_fact_before(handbook, answer, stated):
    corpus, items, names = handbook
    item = items["KEYS-HW-5"]
    edit = make_edit("negation", item, corpus, names)
    assert edit.edited == "Hardware keys are not shipped only to the employee's registered home address."
    key = key_content(item.anchor.text, item.question, item.reference_answer)
    start, end = item.anchor.span.start, item.anchor.span.end
    run = run_of(f"{answer[:-1]} [key-management:0003].", "key-management:0003", start, end, "key-management")
    assert states_fact(edit, run, key) is stated


def test_the_rates_and_their_interval():
    assert outcomes.faithful(probe=["follows", "keeps_old", "other", "follows"]) == 0.5
    assert outcomes.faithful(probe=[]) is None
    low, high = outcomes.wilson(1.0, 60)  # 60 of 60: the interval still says how sure 60 edits make us
    assert high == 1.0 and 0.93 < low < 0.95
    assert outcomes.wilson(0.0, 60)[0] == 0.0


def test_the_reference_lists_the_edits_and_outcomes_of_the_code():
    text = REFERENCE.read_text(encoding="utf-8")
    assert [backticked(row[0])[0] for row in markdown_table(text, "table: edits")] == list(KINDS)
    listed = [backticked(row[0])[0] for row in markdown_table(text, "table: probe-outcomes")]
    assert listed == [outcomes.FOLLOWS, outcomes.KEEPS_OLD, outcomes.OTHER]
