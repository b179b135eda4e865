"""The pluggable support model, on tiny randomly initialised CrossEncoders built here: plumbing, not quality."""

import importlib.util
import json
import math
import socket
import sys
from pathlib import Path

import numpy as np
import pytest

from ragaudit.checks.metrics.cross_encoder import CrossEncoderScorer
from ragaudit.checks.metrics.embed import HashingEncoder
from ragaudit.checks.metrics.support import PARAMS_PATH, SupportScorer, make_support_scorer
from ragaudit.core.errors import InputError

WORDS = (
    "hardware keys are rotated every twelve months by the security team policy administrators keep two "
    "registered lost reported to service desk within one day cafeteria serves tomato soup on fridays "
    "passwords ninety days reuse is blocked"
).split()
SEGMENT = "hardware keys are rotated every twelve months"
CITED = ["policy keys are rotated every twelve months", "the cafeteria serves tomato soup on fridays"]
NLI_LABELS = {0: "contradiction", 1: "entailment", 2: "neutral"}


def _build(folder, num_labels: int, id2label: dict | None = None, *, head: bool = True, seed: int = 0):
    import torch
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        BertModel,
        BertTokenizer,
    )

    folder.mkdir(parents=True)
    vocab = folder.parent / f"{folder.name}-vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n", encoding="utf-8")
    labels = id2label or {i: f"LABEL_{i}" for i in range(num_labels)}
    config = BertConfig(
        vocab_size=5 + len(WORDS),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=num_labels,
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
    )
    torch.manual_seed(seed)
    model = (BertForSequenceClassification if head else BertModel)(config)
    model.save_pretrained(folder)
    BertTokenizer(str(vocab)).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("cross-encoders")
    return {
        "reranker": _build(root / "reranker", 1),
        "nli": _build(root / "nli", 3, NLI_LABELS, seed=1),
        "nli-upper": _build(root / "nli-upper", 3, {0: "NEUTRAL", 1: "CONTRADICTION", 2: "ENTAILMENT"}, seed=1),
        "two-labels": _build(root / "two-labels", 2, seed=2),
        "bare": _build(root / "bare", 1, head=False, seed=3),
    }


def _logits(folder, pairs: list[tuple[str, str]]) -> np.ndarray:
    """The model's logits computed with transformers directly, independently of the scorer."""
    import torch
    from transformers import BertForSequenceClassification, BertTokenizer

    tokenizer = BertTokenizer.from_pretrained(folder, local_files_only=True)
    model = BertForSequenceClassification.from_pretrained(folder, local_files_only=True).eval()
    with torch.no_grad():
        rows = [model(**tokenizer(a, b, return_tensors="pt")).logits[0].numpy() for a, b in pairs]
    return np.array(rows, dtype=np.float64)


def _inputs(segment, cited):
    return [(segment, c) for c in cited] + ([(segment, "\n".join(cited))] if len(cited) > 1 else [])


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the scorer tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_a_reranker_loads_offline_and_gives_the_best_sigmoid(models, no_network):
    scorer = CrossEncoderScorer(models["reranker"])
    (score,) = scorer.score_many([(SEGMENT, CITED)])
    expected = max(1 / (1 + math.exp(-z)) for z in _logits(models["reranker"], _inputs(SEGMENT, CITED))[:, 0])
    assert 0.0 <= score <= 1.0
    assert score == pytest.approx(expected, abs=1e-5)
    assert scorer.model_id == "cross-encoder:reranker"


def test_scores_are_deterministic_and_order_free(models):
    pairs = [(SEGMENT, CITED), ("passwords ninety days", CITED[:1]), (SEGMENT, CITED[::-1][:1])]
    first = CrossEncoderScorer(models["reranker"]).score_many(pairs)
    again = CrossEncoderScorer(models["reranker"]).score_many(pairs[::-1])[::-1]
    assert np.all((first >= 0) & (first <= 1))
    assert first.tolist() == pytest.approx(again.tolist(), abs=1e-6)


@pytest.mark.parametrize("name, column", [("nli", 1), ("nli-upper", 2)])
def test_an_nli_model_gives_the_entailment_probability(models, name, column):
    (score,) = CrossEncoderScorer(models[name]).score_many([(SEGMENT, CITED)])
    logits = _logits(models[name], _inputs(SEGMENT, CITED))
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    assert score == pytest.approx(probabilities[:, column].max(), abs=1e-5)
    assert score != pytest.approx(probabilities[:, (column + 1) % 3].max(), abs=1e-4)


def test_empty_segment_or_evidence_scores_zero(models):
    empty = [(SEGMENT, []), ("", CITED), ("[3]", CITED), (SEGMENT, ["", "  ", "[2]"])]
    params = {"schema": "ragaudit.support_params/1", "kind": "cross-encoder", "intercept": 3.0, "slope": 1.0}
    for scorer in (CrossEncoderScorer(models["nli"]), CrossEncoderScorer(models["nli"], params)):
        assert scorer.score_many(empty).tolist() == [0.0] * 4
        assert scorer.score_many([]).tolist() == []


def test_calibration_params_are_applied_to_the_raw_score(models, tmp_path):
    pairs = [(SEGMENT, CITED), ("passwords ninety days", CITED[:1])]
    raw = CrossEncoderScorer(models["reranker"]).score_many(pairs)
    params = {"schema": "ragaudit.support_params/1", "kind": "cross-encoder", "intercept": -1.5, "slope": 4.0}
    path = tmp_path / "params.json"
    path.write_text(json.dumps(params))
    scorer = make_support_scorer(str(models["reranker"]), params=str(path))
    assert isinstance(scorer, CrossEncoderScorer) and scorer.model_id == "cross-encoder:reranker:calibrated"
    expected = [1 / (1 + math.exp(1.5 - 4.0 * r)) for r in raw]
    assert scorer.score_many(pairs).tolist() == pytest.approx(expected, abs=1e-9)


def test_no_model_gives_the_bundled_scorer(tmp_path):
    encoder = HashingEncoder()
    for model in (None, ""):
        scorer = make_support_scorer(model, encoder=encoder)
        assert isinstance(scorer, SupportScorer) and scorer.encoder is encoder
        assert scorer.model_id == "ragaudit-support:all-MiniLM-L6-v2"
    shipped = json.loads(PARAMS_PATH.read_text())
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({**shipped, "intercept": shipped["intercept"] + 1.0}))
    assert (
        make_support_scorer(None, params=str(edited), encoder=encoder).params["intercept"] == shipped["intercept"] + 1.0
    )
    calibration = tmp_path / "cross-encoder.json"
    calibration.write_text(
        json.dumps({"schema": "ragaudit.support_params/1", "kind": "cross-encoder", "intercept": 0.0, "slope": 1.0})
    )
    with pytest.raises(InputError, match="cross-encoder.json: expected support params for the bundled scorer"):
        make_support_scorer(None, params=str(calibration))


def test_what_is_not_a_cross_encoder_folder_is_refused(models, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.bin").write_text("x")
    cases = {
        str(tmp_path / "empty"): "found a folder without config.json",
        str(tmp_path / "missing"): "found no such file or folder",
        str(tmp_path / "file.bin"): "found a file",
        str(models["bare"]): "found a BertModel model without a classification head",
    }
    for path, found in cases.items():
        with pytest.raises(InputError) as caught:
            make_support_scorer(path)
        expected = f"{path}: expected a sentence-transformers CrossEncoder folder (config.json), {found}"
        assert str(caught.value) == expected
        assert caught.value.exit_code == 3
    labels = r"an NLI model with an 'entailment' label, found labels \['LABEL_0', 'LABEL_1'\]"
    with pytest.raises(InputError, match=labels):
        make_support_scorer(str(models["two-labels"]))


def test_bad_calibration_params_are_refused(models, tmp_path):
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"schema": "ragaudit.support_params/1", "kind": "cross-encoder", "intercept": 0}))
    with pytest.raises(InputError, match=r"wrong.json: expected a finite number in 'slope', found None"):
        make_support_scorer(str(models["reranker"]), params=str(wrong))
    with pytest.raises(InputError, match="no such calibration file"):
        make_support_scorer(str(models["reranker"]), params=str(tmp_path / "absent.json"))


def _calibration_bench():
    path = Path(__file__).resolve().parents[2] / "bench" / "calibrate_support.py"
    if "calibrate_support" not in sys.modules:
        spec = importlib.util.spec_from_file_location("calibrate_support", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
        spec.loader.exec_module(module)
    return sys.modules["calibrate_support"]


def test_the_calibration_script_writes_params_the_scorer_reads(models, tmp_path, capsys):
    # six questions in three fields, each with supported and unsupported claims, in ExpertQA's shape
    records = []
    for q in range(6):
        claims = [
            {
                "claim_string": SEGMENT,
                "evidence": [f"[1] https://example.org/{q}\n\n{CITED[0]}"],
                "support": "Complete",
            },
            {
                "claim_string": "passwords ninety days reuse is blocked",
                "evidence": [f"[2] https://x/{q}\n\n{CITED[1]}"],
                "support": "Incomplete" if q % 2 else "Partial",
            },
            {
                "claim_string": "the security team keeps two keys",
                "evidence": ["[3] https://only-a-url"],
                "support": "Complete",
            },
        ]
        records.append(
            {
                "question": f"question {q}",
                "metadata": {"field": ["Law", "Music", "Biology"][q % 3]},
                "answers": {"system": {"claims": claims}},
            }
        )
    data = tmp_path / "claims.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "ce.json"
    bench = _calibration_bench()
    assert bench.main(["--cross-encoder", str(models["reranker"]), "--data", str(data), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "12 claims (6 Complete) over 6 questions" in printed  # the URL-only claims are left out
    assert "leave-one-field-out (3 fields)" in printed
    params = json.loads(out.read_text())
    assert params["schema"] == "ragaudit.support_params/1" and params["kind"] == "cross-encoder"
    assert params["model"] == "reranker" and params["training"]["claims"] == 12
    scorer = make_support_scorer(str(models["reranker"]), params=str(out))
    raw = CrossEncoderScorer(models["reranker"]).score_many([(SEGMENT, CITED[:1])])
    expected = 1 / (1 + math.exp(-(params["intercept"] + params["slope"] * raw[0])))
    assert scorer.score(SEGMENT, CITED[:1]) == pytest.approx(expected, abs=1e-9)


def test_a_run_scores_support_with_the_configured_cross_encoder(models, tmp_path):
    """`[support] model = PATH` reaches the audit: every claim's support is the CrossEncoder's."""
    import json as _json

    from helpers import BM25, invoke, run_dir_of, write_config

    config = write_config(tmp_path, BM25, items=2, seeds="[1]")
    config.write_text(
        config.read_text().replace("[embedder]", f'[support]\nmodel = "{models["reranker"]}"\n\n[embedder]')
    )
    result = invoke("run", config, "--no-gate")
    assert result.exit_code == 0, result.output
    report = _json.loads((run_dir_of(result) / "report.json").read_text())
    assert report["meta"]["support_model"] == CrossEncoderScorer(models["reranker"]).model_id
    texts = {ref: s["text"] for ref, s in report["snippets"].items()}
    scorer = CrossEncoderScorer(models["reranker"])
    for run in (r for q in report["questions"] for r in q["runs"]):
        cited_refs = {s["snippet_id"]: texts[s["ref"]] for s in run["spans"]}
        for claim in run["claims"]:
            expected = scorer.score_many([(claim["text"], [cited_refs[c] for c in claim["citations"]])])[0]
            assert claim["support"] == pytest.approx(float(expected), abs=1e-6)
