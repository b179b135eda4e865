"""`ragaudit label` (a page on 127.0.0.1, driven in headless Chromium) and `ragaudit agree`: labels
written blind, append-only, tied to the run's digest; agreement figures recomputed here by hand."""

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from helpers import BM25, chromium, invoke, run_dir_of, write_config

from ragaudit.decisions.agreement import Dimension, estimate, kappa
from ragaudit.io.labels import Label, read_labels, run_digest
from ragaudit.io.stream import read_trace_file


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("label")
    config = write_config(tmp, BM25, items=6, seeds="[1]")
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    return run_dir_of(result)


def digests(run_dir: Path) -> dict:
    return {(t.config, t.qid, t.variant, t.seed): run_digest(t) for t in read_trace_file(run_dir / "traces.jsonl")}


def label_line(key, digest, correct=True, supported=True, citation=True, **extra) -> str:
    pipeline, qid, variant, seed = key
    body = {"pipeline": pipeline, "qid": qid, "variant": variant, "seed": seed, "correct": correct,
            "supported": supported, "citation": citation, "note": "", "labeller": "me",
            "time": "2026-12-07T10:00:00Z", "digest": digest, **extra}  # fmt: skip
    return json.dumps(body)


class Served:
    """`ragaudit label` in a process of its own, its page's address read from its output."""

    def __init__(self, *args):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ragaudit", "label", *map(str, args), "--no-open"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # a shell without job control starts background jobs with SIGINT ignored, which Python and
            # its children keep: the server gets ctrl-C as a terminal sends it, however the suite started
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        line = self.process.stdout.readline()
        assert line.startswith("label at http://127.0.0.1:"), line + self.process.stderr.read()
        self.url = line.split()[2]
        self.base, self.token = self.url.split("/?token=")

    def call(self, method: str, path: str, body=None, token: str | None = None):
        request = urllib.request.Request(
            self.base + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"X-Ragaudit-Token": self.token if token is None else token},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def finish(self) -> tuple[int, str]:
        out, err = self.process.communicate(timeout=30)
        return self.process.returncode, out + err


@pytest.mark.browser
def test_a_person_labels_runs_blind_in_the_browser_and_the_labels_are_appended(run, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    labels = tmp_path / "labels.jsonl"
    served = Served(run, "--labels", labels, "--sample", "2", "--by", "stratified", "--labeller", "ana")
    try:
        with chromium(1280, 900) as browser:
            browser.get(served.url)
            WebDriverWait(browser, 10).until(lambda b: b.find_element(By.ID, "question").text)
            page = browser.find_element(By.TAG_NAME, "body")
            # blind: nothing of ragaudit's verdict before the run is labelled
            assert browser.find_elements(By.CSS_SELECTOR, "[data-verdict]") == []
            assert "cites the gold span" not in browser.page_source
            assert not browser.find_element(By.ID, "verdict").is_displayed()
            first = browser.find_element(By.ID, "where").text
            page.send_keys("c", "s", "s", "t")  # correct yes, supported yes then no, citation yes
            page.send_keys("n")
            browser.switch_to.active_element.send_keys("a hesitant note", Keys.ESCAPE)
            page.send_keys(Keys.ENTER)
            WebDriverWait(browser, 10).until(lambda b: b.find_element(By.ID, "verdict").is_displayed())
            shown = {e.get_attribute("data-verdict") for e in browser.find_elements(By.CSS_SELECTOR, "[data-verdict]")}
            assert shown == {"good", "correct", "supported", "citation"}
            page.send_keys(Keys.ARROW_RIGHT)
            WebDriverWait(browser, 10).until(lambda b: b.find_element(By.ID, "where").text != first)
            assert not browser.find_element(By.ID, "verdict").is_displayed()
            page.send_keys(Keys.ENTER)  # not every label set: nothing is written
            assert "set correct, supported, citation first" in browser.find_element(By.ID, "message").text
            page.send_keys("c", "c", "s", "t", "t", Keys.ENTER)  # no, yes, no
            WebDriverWait(browser, 10).until(lambda b: b.find_element(By.ID, "verdict").is_displayed())
            browser.find_element(By.ID, "done").click()
            WebDriverWait(browser, 10).until(lambda b: "Done: 2 labels" in b.find_element(By.TAG_NAME, "body").text)
        code, output = served.finish()
    finally:
        if served.process.poll() is None:
            served.process.kill()
    assert code == 0, output
    assert f"wrote 2 labels to {labels}" in output
    rows = [json.loads(line) for line in labels.read_text().splitlines()]
    assert [(r["correct"], r["supported"], r["citation"]) for r in rows] == [(True, False, True), (False, True, False)]
    assert rows[0]["note"] == "a hesitant note" and {r["labeller"] for r in rows} == {"ana"}
    assert {r["sample"] for r in rows} == {"stratified"}
    known = digests(run)
    for r in rows:
        assert known[(r["pipeline"], r["qid"], r["variant"], r["seed"])] == r["digest"]


def test_the_page_answers_only_its_session_and_takes_only_whole_labels(run, tmp_path):
    labels = tmp_path / "labels.jsonl"
    labels.write_text("", encoding="utf-8")
    served = Served(run, "--labels", labels, "--sample", "1", "--by", "random")
    try:
        assert served.call("GET", "/api/tasks", token="guess")[0] == 403
        assert served.call("POST", "/api/label", {"task": 0, "correct": True}, token="")[0] == 403
        status, found = served.call("GET", "/api/tasks")
        assert status == 200 and len(found["tasks"]) == 1
        assert "verdict" not in json.dumps(found["tasks"]) and "why" not in found["tasks"][0]
        assert served.call("POST", "/api/label", {"task": 0, "correct": True, "supported": True})[0] == 400
        assert (
            served.call("POST", "/api/label", {"task": 7, "correct": True, "supported": True, "citation": True})[0]
            == 400
        )
        assert served.call("POST", "/api/label", {"task": "0"})[0] == 400
        assert labels.read_text() == ""  # nothing half-written
        status, found = served.call(
            "POST", "/api/label", {"task": 0, "correct": False, "supported": True, "citation": True}
        )
        assert status == 200 and set(found["verdict"]) == {"good", "correct", "supported", "citation"}
        assert served.call("POST", "/api/done", {})[0] == 200
        code, _ = served.finish()
    finally:
        if served.process.poll() is None:
            served.process.kill()
    assert code == 0
    assert len(labels.read_text().splitlines()) == 1


def test_labels_never_go_into_a_run_directory(run, tmp_path):
    result = invoke("label", run, "--labels", run / "labels.jsonl", "--no-open")
    assert result.exit_code == 2 and "never written to" in result.output
    folder = tmp_path / "folder"
    folder.mkdir()
    assert invoke("label", run, "--labels", folder, "--no-open").exit_code in (2, 3)


def test_a_run_labelled_before_it_changed_is_offered_again_and_its_label_is_stale(run, tmp_path):
    known = digests(run)
    keys = sorted(known)
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        label_line(keys[0], known[keys[0]]) + "\n" + label_line(keys[1], "sha256:" + "0" * 64) + "\n", encoding="utf-8"
    )
    from ragaudit.decisions.labelling import open_session

    session = open_session(run, labels=labels)
    assert keys[0] not in session.keys and keys[1] in session.keys
    assert [s.key for s in session.stale] == [keys[1]]
    result = invoke("agree", run, "--labels", labels)
    assert result.exit_code == 0
    assert f"{labels}:2: stale" in result.output and "1 labelled runs" in result.output


def test_agree_refuses_labels_of_another_gold_set_or_run_naming_the_file(run, tmp_path):
    known = digests(run)
    key = sorted(known)[0]
    other_set = tmp_path / "other-set.jsonl"
    other_set.write_text(label_line((key[0], "NOT-IN-GOLD", 0, 1), known[key]) + "\n", encoding="utf-8")
    result = invoke("agree", run, "--labels", other_set)
    assert result.exit_code == 3 and str(other_set) in result.output and "another gold set" in result.output
    other_run = tmp_path / "other-run.jsonl"
    other_run.write_text(label_line(("another-pipeline", key[1], key[2], key[3]), known[key]) + "\n", encoding="utf-8")
    result = invoke("agree", run, "--labels", other_run)
    assert result.exit_code == 3 and str(other_run) in result.output and "runs it does not hold" in result.output
    assert invoke("agree", run, "--labels", tmp_path / "missing.jsonl").exit_code in (2, 3)


def test_hostile_labels_files_are_read_with_located_problems(run, tmp_path):
    known = digests(run)
    keys = sorted(known)
    labels = tmp_path / "labels.jsonl"
    lines = [
        label_line(keys[0], known[keys[0]]),
        "not json at all",
        json.dumps([1, 2]),
        label_line(keys[1], known[keys[1]], correct="yes"),
        label_line(keys[1], known[keys[1]], colour="red"),
        label_line(keys[2], "md5:abc"),
        label_line(keys[3], known[keys[3]], sample="handpicked"),
        label_line(keys[0], known[keys[0]], correct=False),  # the same run again: the later label is kept
        "\x00\xff garbage",
    ]
    labels.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")
    found = read_labels(labels)
    where = sorted((p.line, p.path) for p in found.problems)
    assert where == [
        (1, None),  # labelled again on line 8
        (2, None),
        (3, None),
        (4, "$.correct"),
        (5, "$.colour"),
        (6, "$.digest"),
        (7, "$.sample"),
        (9, None),
    ]
    assert found.labels[keys[0]].correct is False
    result = invoke("agree", run, "--labels", labels, "--format", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["labelled"] == 1
    assert f"{labels}:4: $.correct: expected true or false" in result.stderr


def test_kappa_precision_and_recall_are_those_computed_by_hand():
    labels = [True, True, True, False, False, False, False, True]
    verdict = [True, True, False, False, False, True, False, True]
    found = Dimension.of("good", labels, verdict)
    # observed 6/8; label yes 4/8, verdict yes 4/8: expected 0.5; kappa (0.75 - 0.5) / 0.5
    assert found.matrix == (3, 1, 1, 3) and found.kappa == pytest.approx(0.5)
    assert found.precision == pytest.approx(3 / 4) and found.recall == pytest.approx(3 / 4)
    low, high = found.kappa_ci
    assert -1 <= low < 0.5 < high <= 1
    assert kappa(np.array([True, True]), np.array([True, True])) is None  # one class only: undefined


def test_the_corrected_rate_is_the_prediction_powered_estimate(run):
    from ragaudit.decisions.agreement import RunVerdict

    def verdict(i: int, good: bool) -> RunVerdict:
        return RunVerdict(("p", f"q{i}", 0, 1), "sha256:" + "0" * 64, good, True, True, None, "", "", "")

    verdicts = [verdict(i, i % 4 != 0) for i in range(40)]  # ragaudit: 30 of 40 good
    sample = []
    for v in verdicts[:12]:  # labelled at random: the person says no where ragaudit says yes on q1, q2
        good = v.good and v.key[1] not in ("q1", "q2")
        sample.append((Label(*v.key, good, True, True, "", "me", "t", v.digest, "random"), v))
    found = estimate(verdicts, sample)
    rate = 30 / 40
    d = [0.0] * 12
    d[1] = d[2] = -1.0  # q1 and q2: the label says no where ragaudit says yes
    mean = sum(d) / 12
    variance = sum((x - mean) ** 2 for x in d) / 11  # 0.1515…, below the floor of 2.5 in 13 less mean²: 0.1645…
    variance = max(variance, 2.5 / 13 - mean**2)
    spread = (variance / 12 * (1 - 12 / 40)) ** 0.5  # a sample of 12 of these 40 runs, drawn without replacement
    assert found.rate == pytest.approx(rate)
    assert found.corrected == pytest.approx(rate + mean)
    assert found.ci == pytest.approx((rate + mean - 1.959964 * spread, rate + mean + 1.959964 * spread), abs=1e-5)
    same = [(Label(*v.key, v.good, True, True, "", "me", "t", v.digest, "random"), v) for v in verdicts[:12]]
    agreeing = estimate(verdicts, same)  # no difference in the sample: the interval keeps the width of 1/2 in 13
    floor = (0.5 / 13) / 12 * (1 - 12 / 40)
    assert agreeing.ci == pytest.approx((rate - 1.959964 * floor**0.5, rate + 1.959964 * floor**0.5), abs=1e-5)
    chosen = [
        (Label(*lab.key, lab.correct, True, True, "", "me", "t", lab.digest, "uncertainty"), v) for lab, v in sample
    ]
    assert estimate(verdicts, chosen).corrected is None  # not a random sample: no correction


def test_label_waits_for_nobody_forever(run, tmp_path):
    """A session the person walks away from ends with ctrl-C (SIGINT) and keeps what was written."""
    labels = tmp_path / "labels.jsonl"
    served = Served(run, "--labels", labels, "--sample", "1")
    try:
        assert (
            served.call("POST", "/api/label", {"task": 0, "correct": True, "supported": True, "citation": True})[0]
            == 200
        )
        served.process.send_signal(2)
        deadline = time.monotonic() + 20
        while served.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        if served.process.poll() is None:
            served.process.kill()
    assert served.process.returncode == 130
    assert len(labels.read_text().splitlines()) == 1


def test_labels_a_config_names_are_hashed_with_the_run_and_gate_the_corrected_rate(run, tmp_path):
    """[labels] path: the report carries the agreement and the corrected rate, [gate]
    labelled_good_min gates on its lower end, and verify names the labels once they change."""
    import shutil

    known = digests(run)
    keys = sorted(known)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(label_line(k, known[k], sample="random") + "\n" for k in keys[:12]), encoding="utf-8")
    config = tmp_path / "labelled.toml"
    source = Path(json.loads((run / "manifest.json").read_text())["config_path"])
    text = source.read_text(encoding="utf-8")
    shutil.copy(source.parent / "gold.jsonl", tmp_path / "gold.jsonl")  # the config names it beside itself
    (tmp_path / "recorded.jsonl").write_text((run / "traces.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    text = text.replace("[embedder]", f'[labels]\npath = "{labels}"\n\n[gate]\nlabelled_good_min = 0.99\n\n[embedder]')
    text = text.split("[[pipelines]]")[0] + '[[pipelines]]\nname = "bm25"\nkind = "replay"\ntraces = "recorded.jsonl"\n'
    config.write_text(text, encoding="utf-8")
    result = invoke("run", config)
    assert result.exit_code == 1, result.output  # 0.99 is above the lower end of any interval 12 labels give
    labelled_run = run_dir_of(result)
    report = json.loads((labelled_run / "report.json").read_text())
    found = report["meta"]["labels"]
    assert found["labelled"] == 12 and found["estimates"]["bm25"]["labelled"] == 12
    [check] = [c for c in report["gate"]["checks"] if c["name"] == "labelled_good_min"]
    rate = found["estimates"]["bm25"]
    assert check["value"] == pytest.approx(rate["ci"][0]) and (check["value"] >= 0.99) == check["passed"]
    assert "corrected by 12 labels on a random sample" in check["detail"]
    assert invoke("verify", labelled_run).exit_code == 0
    with labels.open("a", encoding="utf-8") as more:
        more.write(label_line(keys[12], known[keys[12]], correct=False, sample="random") + "\n")
    changed = invoke("verify", labelled_run)
    assert changed.exit_code == 5 and "labels" in changed.output


def test_report_html_shows_the_agreement_and_the_corrected_rates(run):
    from ragaudit.outputs.render.html import render_html

    agreement = [
        {"dimension": "good", "runs": 12, "kappa": 0.5, "kappa_ci": [0.1, 0.9], "precision": 0.75, "recall": 0.6,
         "matrix": {"label_yes_verdict_yes": 3, "label_yes_verdict_no": 1, "label_no_verdict_yes": 2,
                    "label_no_verdict_no": 6}},
    ]  # fmt: skip
    estimates = {"bm25": {"rate": 0.75, "corrected": 0.5833, "ci": [0.39, 0.78], "labelled": 12, "runs": 40,
                          "why_not": None}}  # fmt: skip
    report = json.loads((run / "report.json").read_text())
    report["meta"]["labels"] = {"path": "labels.jsonl", "sha256": "sha256:" + "a" * 64, "labelled": 12, "stale": 1,
                                "unknown": 0, "agreement": agreement, "estimates": estimates}  # fmt: skip
    page = render_html(report)
    section = page.split('<section id="labels">')[1].split("</section>")[0]
    assert "12 labelled runs" in section and "1 labels of runs that changed since" in section
    assert '<td>good</td><td class="num">12</td><td class="num">3</td><td class="num">1</td>' in section
    assert "[0.10, 0.90]" in section and "58.3%" in section and "[39.0%, 78.0%]" in section
    del report["meta"]["labels"]
    assert '<section id="labels">' not in render_html(report)
