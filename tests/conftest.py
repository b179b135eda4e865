import copy
import os
from pathlib import Path

import pytest

from ragaudit.analyzers import ANALYZERS
from ragaudit.io.corpus import load_corpus

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


def payload_for(corpus, doc_id: str, sentence: str, *, snippet_id: str, section_id: str, score: float,
                rank: int, analyzer: str = "lowercase") -> dict:
    doc = corpus[doc_id]
    start = doc.text.index(sentence)
    return {
        "doc_id": doc_id, "section_id": section_id, "snippet_id": snippet_id,
        "source_url": f"file:///corpus/{doc_id}.md#{section_id}",
        "offsets": {"start": start, "end": start + len(sentence), "unit": "char"},
        "tokens": ANALYZERS[analyzer].count(sentence), "index_hash": "sha256:abc",
        "embed_model": "all-MiniLM-L6-v2:mean", "analyzer": analyzer, "rev": doc.rev,
        "score_norm": score, "score_raw": score * 10, "k_pos": rank, "text": sentence,
    }


KEYS_SENTENCE = "Hardware keys are rotated every 12 months."
PASSWORDS_SENTENCE = "Passwords are rotated every 90 days."


@pytest.fixture
def valid_trace(corpus) -> dict:
    """A trace that every rule accepts, against the `corpus` fixture."""
    keys = payload_for(corpus, "policies", KEYS_SENTENCE, snippet_id="pol-keys-1",
                       section_id="policies/security/keys", score=0.9, rank=1)
    passwords = payload_for(corpus, "policies", PASSWORDS_SENTENCE, snippet_id="pol-pw-1",
                            section_id="policies/security/passwords", score=0.4, rank=2)
    return {
        "schema": "ragaudit.trace/1", "qid": "SEC-KEYS-1", "variant": 0, "seed": 1,
        "query": "How often are hardware keys rotated?", "config": "bm25-k5", "retriever_name": "bm25",
        "retrieved_at": "2026-11-22T10:00:00Z",
        "index": {"index_hash": "sha256:abc", "analyzer": "lowercase", "embed_model": "all-MiniLM-L6-v2:mean",
                  "store": "bm25"},
        "retrieved": [keys, passwords],
        "answer": {"raw": '{"citations": ["pol-keys-1"], "answer": "Every 12 months."}',
                   "text": "Hardware keys are rotated every 12 months [pol-keys-1].",
                   "segments": [{"seg": 1, "text": "Hardware keys are rotated every 12 months.",
                                 "citations": ["pol-keys-1"]}]},
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
def private_cache(tmp_path_factory):
    """Keep every cache the tests make out of the user's cache folder."""
    os.environ["RAGAUDIT_CACHE"] = str(tmp_path_factory.mktemp("cache"))
