"""A new user's loop on 40 runs, driven through the real page in headless Chromium: `run` →
`label` (keyboard only) → `agree` → `calibrate --labels` → `run` with the fitted calibration.

Prints, per step, the machine's wall time and what the person has to do (commands typed, keys
pressed), so the person's own time is the reading time per run plus what is printed here.
The person's labels are simulated: they agree with ragaudit except that they call a claim
supported only at a support of 0.8 or more (the fit should find that), set with the keys the
page documents (c, s, t cycle yes → no; Enter saves; → moves on).

    HF_HUB_OFFLINE=1 .venv/bin/python bench/labelflow.py [--runs 40]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "gold_sets" / "handbook"
STRICT = 0.8


def ragaudit(*args: object) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "ragaudit", *map(str, args)], capture_output=True, text=True)
    return time.monotonic() - started, done


def config(tmp: Path, items: int, calibration: Path | None = None) -> Path:
    gold = tmp / "gold.jsonl"
    gold.write_text("".join((DEMO / "gold.jsonl").read_text().splitlines(keepends=True)[:items]))
    gate = f'[gate]\nfrom = "{calibration}"\n' if calibration else ""
    path = tmp / ("fitted.toml" if calibration else "audit.toml")
    path.write_text(
        f'[audit]\ngold = "gold.jsonl"\ncorpus = "{DEMO / "corpus"}"\nparaphrases = 3\nseeds = [1]\nout = "runs"\n'
        f'{gate}\n[embedder]\nmodel = "hashing"\n\n'
        '[[pipelines]]\nname = "bm25"\nkind = "reference"\nretriever = "bm25"\n'
    )
    return path


def keys_for(verdict: dict) -> list[str]:
    """c, s, t pressed once for yes, twice for no, then Enter and →."""
    return [k * (1 if verdict[d] else 2) for k, d in (("c", "correct"), ("s", "supported"), ("t", "citation"))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    from ragaudit.decisions.agreement import run_verdicts

    tmp = Path(tempfile.mkdtemp(prefix="labelflow-"))
    items = -(-args.runs // 3)
    steps: list[tuple[str, float, str]] = []
    seconds, done = ragaudit("-q", "run", config(tmp, items), "--no-gate")
    first = sorted(p for p in (tmp / "runs").iterdir() if p.is_dir())[-1]
    steps.append(("ragaudit run audit.toml", seconds, f"exit {done.returncode}"))
    verdicts = run_verdicts(first)
    person = {}
    for key, v in verdicts.items():
        strict = bool(v.claims) and all(c["evidence"]["said"] or c["evidence"]["support"] >= STRICT for c in v.claims)
        person[key] = {"correct": v.correct, "supported": strict, "citation": v.citation}

    labels = tmp / "labels.jsonl"
    started = time.monotonic()
    served = subprocess.Popen(
        [sys.executable, "-m", "ragaudit", "label", str(first), "--labels", str(labels), "--sample", str(args.runs),
         "--labeller", "bench", "--no-open"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = served.stdout.readline().split()[2]
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"):
        options.add_argument(flag)
    browser = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    pressed, waited = 0, 0.0
    try:
        browser.get(url)
        WebDriverWait(browser, 10).until(lambda b: b.find_element(By.ID, "question").text)
        page = browser.find_element(By.TAG_NAME, "body")
        for i in range(args.runs):
            where = browser.find_element(By.ID, "where").text  # "pipeline · qid vN sN" of the run shown
            pipeline, rest = (w.strip() for w in where.split("·"))
            qid, variant, seed = rest.rsplit(" ", 2)
            key = (pipeline, qid, int(variant.lstrip("v")), int(seed.lstrip("s")))
            strokes = keys_for(person[key])
            page.send_keys(*strokes, Keys.ENTER)
            pressed += sum(len(s) for s in strokes) + 1
            shown = time.monotonic()
            WebDriverWait(browser, 10).until(lambda b: b.find_element(By.ID, "verdict").is_displayed())
            waited += time.monotonic() - shown
            if i < args.runs - 1:
                page.send_keys(Keys.ARROW_RIGHT)
                pressed += 1
                WebDriverWait(browser, 10).until(lambda b, w=where: b.find_element(By.ID, "where").text != w)
        browser.find_element(By.ID, "done").click()
        served.communicate(timeout=30)
    finally:
        browser.quit()
        if served.poll() is None:
            served.kill()
    steps.append(
        (f"ragaudit label (page, {args.runs} runs)", time.monotonic() - started,
         f"{pressed} keys ({pressed / args.runs:.1f} per run); the page answered each save in {waited / args.runs * 1000:.0f} ms")
    )  # fmt: skip
    seconds, done = ragaudit("agree", first, "--labels", labels)
    steps.append(("ragaudit agree", seconds, f"exit {done.returncode}"))
    calibration = tmp / "calibration.json"
    seconds, done = ragaudit("calibrate", config(tmp, items), "--labels", labels, "--run", first, "--out", calibration)
    fitted = json.loads(calibration.read_text())["claims"]["support"] if calibration.exists() else None
    steps.append(("ragaudit calibrate --labels --run", seconds, f"exit {done.returncode}, support threshold {fitted}"))
    seconds, done = ragaudit("-q", "run", config(tmp, items, calibration), "--no-gate")
    steps.append(("ragaudit run fitted.toml", seconds, f"exit {done.returncode}"))
    second = sorted(p for p in (tmp / "runs").iterdir() if p.is_dir())[-1]
    seconds, done = ragaudit("agree", second, "--labels", labels, "--format", "json")
    kappa = {d["dimension"]: d["kappa"] for d in json.loads(done.stdout)["dimensions"]}
    steps.append(("ragaudit agree (the fitted run)", seconds, f"supported kappa {kappa['supported']:.2f}"))

    print(f"{'step':38} {'machine s':>10}  what the person does / finds")
    for name, taken, what in steps:
        print(f"{name:38} {taken:10.1f}  {what}")
    total = sum(t for _, t, _ in steps)
    print(f"{'machine time in all':38} {total:10.1f}  6 commands typed, {pressed} keys pressed")
    for reading in (5, 10, 12):
        person_s = reading * args.runs + total
        print(f"with {reading:2d} s of reading per run: {person_s / 60:.1f} min of the person's time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
