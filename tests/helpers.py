"""What several test modules share: the handbook fixture texts, run configs and the CLI, trace
files with every kind of defect, and the path to the shared data. Tests import from here, never
from each other."""

import copy
import json
import os
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragaudit.analyzers import ANALYZERS
from ragaudit.cli import main
from ragaudit.types import Anchor, GoldItem, Span
from ragaudit.validate import Context, Validator

SHARED = Path(__file__).resolve().parents[1].parent / "shared"

POLICIES = """# Policies

Every rule here applies to all staff.

## Security

### Keys

Hardware keys are rotated every 12 months. Administrators keep two registered keys.

### Passwords

Passwords are rotated every 90 days. Reuse of the last 5 passwords is blocked.
"""

ONCALL = """# On-call

## Paging

A SEV1 page must be acknowledged within 5 minutes.
"""


def shared_path(*parts: str) -> Path:
    """A path under ../shared/data; skips when absent unless RAGAUDIT_REQUIRE_SHARED=1, where it fails."""
    path = SHARED.joinpath("data", *parts)
    if not path.exists():
        if os.environ.get("RAGAUDIT_REQUIRE_SHARED") == "1":
            pytest.fail(f"{path} is required (RAGAUDIT_REQUIRE_SHARED=1) but missing")
        pytest.skip(f"shared data not present: {path}")
    return path


def payload_for(
    corpus,
    doc_id: str,
    sentence: str,
    *,
    snippet_id: str,
    section_id: str,
    score: float,
    rank: int,
    analyzer: str = "lowercase",
) -> dict:
    doc = corpus[doc_id]
    start = doc.text.index(sentence)
    return {
        "doc_id": doc_id,
        "section_id": section_id,
        "snippet_id": snippet_id,
        "source_url": f"file:///corpus/{doc_id}.md#{section_id}",
        "offsets": {"start": start, "end": start + len(sentence), "unit": "char"},
        "tokens": ANALYZERS[analyzer].count(sentence),
        "index_hash": "sha256:abc",
        "embed_model": "all-MiniLM-L6-v2:mean",
        "analyzer": analyzer,
        "rev": doc.rev,
        "score_norm": score,
        "score_raw": score * 10,
        "k_pos": rank,
        "text": sentence,
    }


KEYS_SENTENCE = "Hardware keys are rotated every 12 months."
PASSWORDS_SENTENCE = "Passwords are rotated every 90 days."


ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "gold_sets" / "handbook"
FIXTURES = Path(__file__).resolve().parent / "pipelines" / "fixtures"


def write_config(tmp_path, pipelines: str, *, items: int = 6, seeds="[1, 2]", extra: str = "") -> Path:
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join((DEMO / "gold.jsonl").read_text().splitlines(keepends=True)[:items]))
    config = tmp_path / "audit.toml"
    config.write_text(f"""
[audit]
gold = "gold.jsonl"
corpus = "{DEMO / "corpus"}"
paraphrases = 3
seeds = {seeds}
out = "runs"
{extra}
[embedder]
model = "hashing"

{pipelines}
""")
    return config


BM25 = '[[pipelines]]\nname = "bm25"\nkind = "reference"\nretriever = "bm25"\n'
TFIDF = '[[pipelines]]\nname = "tfidf"\nkind = "reference"\nretriever = "tfidf"\nrerank = "mmr"\ntemperature = 0.5\n'


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def run_dir_of(result) -> Path:
    return Path(result.output.strip().splitlines()[-1].split("run directory: ")[1])


def comparable(report: dict) -> dict:
    """A report without the parts that may differ between identical runs: meta (times, versions)."""
    return {k: v for k, v in report.items() if k != "meta"}


ANCHOR = Span(POLICIES.index(KEYS_SENTENCE), POLICIES.index(KEYS_SENTENCE) + len(KEYS_SENTENCE))
ITEM = GoldItem(
    "SEC-KEYS-1",
    "How often are hardware keys rotated?",
    "policies",
    "policies/security/keys",
    Anchor(ANCHOR, KEYS_SENTENCE),
)


MUTATIONS = [
    lambda t: None,
    lambda t: None,
    lambda t: t["retrieved"][0].pop("rev"),
    lambda t: t["retrieved"][1].update(offsets=[9, 3]),
    lambda t: t["retrieved"][0].update(score_norm=1.5, k_pos="1"),
    lambda t: t["retrieved"].reverse() or [p.update(score_norm=0.5) for p in t["retrieved"]],
    lambda t: t["index"].update(analyzer="whitespace"),
    lambda t: t.pop("index"),
    lambda t: t.update(error="timeout", retrieved=[]),
    lambda t: t["answer"]["segments"][0].update(citations=["nope", "pol-pw-1", "pol-keys-1"]),
    lambda t: t["retrieved"][1].update(snippet_id="pol-keys-1", text="not the slice"),
]
ODD_LINES = [
    b"",
    b"   ",
    b"not json",
    b'{"qid": "a", "qid": "b"}',
    b'{"qid": "q", "retrieved": [{"score_norm": NaN}]}',
    b"[" * 300 + b"]" * 300,
    b'{"qid": 7}',
    b"[1, 2]",
    b'{"qid": "\\ud800", "retrieved": []}',
]


def trace_lines(valid_trace, count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    lines = []
    for number in range(count):
        if rng.random() < 0.15:
            lines.append(rng.choice(ODD_LINES))
            continue
        trace = copy.deepcopy(valid_trace)
        trace["qid"] = f"Q{number}"
        rng.choice(MUTATIONS)(trace)
        lines.append(json.dumps(trace, ensure_ascii=rng.random() < 0.5).encode())
    return lines


def write(path: Path, lines: list[bytes], *, newline: bytes = b"\n", torn: bool = False, bom: bool = False) -> Path:
    data = newline.join(lines) + (b"" if torn else newline)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)
    return path


def outcome(validator: Validator, issues) -> dict:
    found = [i.to_dict() for i in issues]
    return {
        "issues": found,
        "records": validator.records,
        "counts": dict(validator.counts),
        "errors": validator.errors,
        "bad": [str(b.problem) for b in validator.bad_lines],
        "unreadable": [str(e) for e in validator.unreadable],
    }


def sequential(paths, ctx=None, offset_unit="char") -> dict:
    validator = Validator(ctx or Context(), offset_unit=offset_unit)
    return outcome(validator, validator.check_paths(paths))


# a [gate] every run passes: for tests of what happens when the gate passes
LENIENT = """[gate]
delta_s_max = 1.0
delta_s_mean_max = 1.0
coverage_min = 0.0
coverage_pass_rate = 0.0
citation_match_min = 0.0
lambda_convergent_min = 0.0
lambda_forbid = []
hallucination_max = 100000
max_errors = 100000
"""
