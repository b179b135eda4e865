"""Support of an answer segment by its cited texts (docs/reference.md §3), offline on CPU.

The bundled scorer gives the probability from a logistic link over a non-negative combination of
features of the segment and its evidence: sentence-embedding cosines (the bundled MiniLM encoder),
recall of the segment's content words, bigrams and capitalised names, and the share of its
quantities, dates and identifiers that the evidence contains (`quantities.py`). Being
non-negative, it never falls when a feature rises. Weights, the features' standardisation and the
link live in `support_params.json`, written by `bench/calibrate_support.py` from expert labels
(ExpertQA); plain JSON numbers, so a score can be recomputed by hand. `[support] model` may name
a local CrossEncoder folder instead (`cross_encoder.CrossEncoderScorer`, calibrated by the same script).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import AbstractSet, Any, Callable, Hashable, Iterable, Protocol, Sequence

import numpy as np

from ragaudit.checks.metrics.cross_encoder import CrossEncoderScorer, check_calibration
from ragaudit.checks.metrics.embed import Encoder, make_encoder
from ragaudit.checks.metrics.quantities import hallucinated, mentions
from ragaudit.core.errors import InputError, Problem
from ragaudit.core.forgetting import forgets
from ragaudit.core.text import WORD, clean, content_stems, names, sentences, stem, units

PARAMS_PATH = Path(__file__).with_name("support_params.json")

# ---------------------------------------------------------------- text

# ---------------------------------------------------------------- features

# Every feature grows with support, so any non-negative combination of them is monotone.
EMBEDDING = ("cos_max", "cos_top3", "cos_window", "cos_passage", "cos_mean", "cos_cover", "cos_chunk")
LEXICAL = ("word_recall", "bigram_recall", "local_recall", "caps_recall", "number_recall")
FEATURES = (*EMBEDDING, *LEXICAL, "lex_overlap")
_CHUNK = 24  # words per fixed-size window: a view of the evidence that does not depend on punctuation


@dataclass(frozen=True, slots=True)
class _Evidence:
    """What the features read of one tuple of cited texts, worked out once however many segments
    cite it: each segment's work is then its own length, not its evidence's."""

    raw_cited: tuple[str, ...]
    passages: list[str]
    units: list[str]
    windows: list[str]
    chunks: list[str]
    stems: frozenset[str]  # content stems of the evidence
    bigrams: frozenset[tuple[str, str]]
    tokens: frozenset[str]  # its words, lower-cased
    caps: frozenset[str]  # its words lower-cased and their stems: what a capitalised name is looked up in
    window_stems: tuple[frozenset[str], ...]  # content stems of each window

    def texts(self) -> list[str]:
        return [*self.passages, *self.units, *self.windows, *self.chunks]


@dataclass(frozen=True, slots=True)
class _Pair:
    raw_segment: str
    seg: str
    seg_sents: list[str]
    evidence: _Evidence

    def texts(self) -> list[str]:
        return [self.seg, *self.seg_sents, *self.evidence.texts()]


def _chunks(text: str) -> list[str]:
    words = text.split()
    if len(words) <= _CHUNK:
        return [text]
    step = _CHUNK // 2
    return [" ".join(words[i : i + _CHUNK]) for i in range(0, len(words) - _CHUNK + step, step)]


@lru_cache(maxsize=16)  # the segments of an answer cite the same snippets, one after another
def _evidence(cited_texts: tuple[str, ...]) -> _Evidence | None:
    passages = [c for c in (clean(t) for t in cited_texts) if c]
    if not passages:
        return None
    per_text = [units(t) for t in cited_texts]
    ev_units = [u for found in per_text for u in found]
    windows = [a + " " + b for found in per_text for a, b in zip(found, found[1:])] or ev_units
    evidence = "\n".join(passages)
    stems = content_stems(evidence)
    tokens = frozenset(t.lower() for t in WORD.findall(evidence))
    return _Evidence(
        tuple(cited_texts),
        passages,
        ev_units,
        windows,
        [c for p in passages for c in _chunks(p)],
        frozenset(stems),
        frozenset(zip(stems, stems[1:])),
        tokens,
        tokens | {stem(t) for t in tokens},
        tuple(frozenset(content_stems(w)) for w in windows),
    )


def _prepare(segment: str, cited_texts: Sequence[str]) -> _Pair | None:
    """The texts to embed for one pair, or None when the segment or its evidence is empty."""
    seg = clean(segment)
    if not seg:
        return None
    evidence = _evidence(tuple(cited_texts))
    if evidence is None:
        return None
    seg_sents = [s for s in map(clean, sentences(segment)) if len(s.split()) >= 3]
    return _Pair(segment, seg, seg_sents or [seg], evidence)


def _recall(needles: Iterable[Hashable], haystack: AbstractSet[object]) -> float:
    needles = list(dict.fromkeys(needles))
    return sum(1 for n in needles if n in haystack) / len(needles) if needles else 1.0


@dataclass(frozen=True, slots=True)
class _Vectors:
    """The embeddings of one evidence's texts, gathered once."""

    units: np.ndarray
    windows: np.ndarray
    passages: np.ndarray
    chunks: np.ndarray


def _features(p: _Pair, vec: Callable[[list[str]], np.ndarray], ev: _Vectors) -> dict[str, float]:
    seg = vec([p.seg])[0]
    sims = np.sort(ev.units @ seg)[::-1]
    cover = (vec(p.seg_sents) @ ev.units.T).max(axis=1)

    evidence = p.evidence
    seg_stems = content_stems(p.seg)
    distinct_stems = list(dict.fromkeys(seg_stems))
    stated = {(m.kind, m.key) for m in mentions(p.raw_segment)}
    missing = hallucinated(p.raw_segment, evidence.raw_cited)
    return {
        "cos_max": float(sims[0]),
        "cos_top3": float(sims[:3].mean()),
        "cos_window": float((ev.windows @ seg).max()),
        "cos_passage": float((ev.passages @ seg).max()),
        "cos_mean": float(sims.mean()),
        "cos_cover": float(cover.min()),
        "cos_chunk": float((ev.chunks @ seg).max()),
        "word_recall": _recall(distinct_stems, evidence.stems),
        "bigram_recall": _recall(zip(seg_stems, seg_stems[1:]), evidence.bigrams),
        "local_recall": max(_recall(distinct_stems, stems) for stems in evidence.window_stems),
        "caps_recall": _recall(sorted(names(p.seg)), evidence.caps),
        "number_recall": 1.0 - len(missing) / len(stated) if stated else 1.0,
        "lex_overlap": _recall((t.lower() for t in WORD.findall(p.seg)), evidence.tokens),
    }


def _distinct_texts(prepared: list[_Pair | None]) -> list[str]:
    # longest first, as the encoder batches them: a batch pads to its longest text, so similar
    # lengths side by side waste the least compute. An evidence cited again adds no text.
    distinct: dict[str, None] = {}
    seen: set[int] = set()
    for p in prepared:
        if p is None:
            continue
        distinct.update(dict.fromkeys([p.seg, *p.seg_sents]))
        if id(p.evidence) not in seen:
            seen.add(id(p.evidence))
            distinct.update(dict.fromkeys(p.evidence.texts()))
    return sorted(distinct, key=len, reverse=True)


def _featurise(prepared: list[_Pair | None], encoder: Encoder) -> list[dict[str, float] | None]:
    distinct = _distinct_texts(prepared)
    matrix = encoder.encode(distinct) if distinct else None  # one call: each text once, in full batches
    row = {t: i for i, t in enumerate(distinct)}

    def vec(texts: list[str]) -> np.ndarray:
        assert matrix is not None  # asked only for texts of the pairs, which were encoded
        return matrix[[row[t] for t in texts]]

    gathered: dict[int, _Vectors] = {}

    def vectors(ev: _Evidence) -> _Vectors:
        if id(ev) not in gathered:
            gathered[id(ev)] = _Vectors(vec(ev.units), vec(ev.windows), vec(ev.passages), vec(ev.chunks))
        return gathered[id(ev)]

    return [None if p is None else _features(p, vec, vectors(p.evidence)) for p in prepared]


def texts_to_encode(pairs: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    """The distinct texts (segments, their sentences, cited passages, units, windows, chunks) that
    scoring `pairs` embeds, longest first: what one batched encode of these pairs costs."""
    return _distinct_texts([_prepare(seg, cited) for seg, cited in pairs])


def feature_rows(pairs: Sequence[tuple[str, Sequence[str]]], encoder: Encoder) -> list[dict[str, float] | None]:
    """Every feature of each (segment, cited texts) pair, None where either side is empty; each
    distinct text, sentence and window is encoded once across all pairs."""
    return _featurise([_prepare(seg, cited) for seg, cited in pairs], encoder)


# ---------------------------------------------------------------- the calibrated scorer


def load_params(path: Path = PARAMS_PATH) -> dict[str, Any]:
    """The shipped calibration, checked against the features this module computes."""
    from ragaudit.io.jsonfiles import read_json_file

    params: dict[str, Any] = read_json_file(Path(path), what="support params file")
    names = params.get("features", [])
    unknown = sorted(set(names) - set(FEATURES))
    if unknown or not names:
        raise ValueError(f"{path}: expected features among {list(FEATURES)}, found {names}")
    for key in ("mean", "scale", "weights"):
        if len(params.get(key, [])) != len(names):
            raise ValueError(f"{path}: expected {len(names)} values in {key!r}, found {len(params.get(key, []))}")
    if any(s <= 0 for s in params["scale"]) or any(w < 0 for w in params["weights"]):
        raise ValueError(f"{path}: scales must be positive and weights non-negative")
    return params


def _sigmoid(logit: float) -> float:
    return 1.0 / (1.0 + math.exp(-logit)) if logit > -700 else 0.0


class SupportScorer:
    """P(the cited texts completely support the segment), from the shipped calibration.

    p = sigmoid(intercept + slope * sum_k weight_k * (feature_k - mean_k) / scale_k). The encoder
    defaults to the model the calibration was fitted with, created on first use.
    """

    def __init__(self, encoder: Encoder | None = None, params: dict[str, Any] | None = None):
        self.params = params if params is not None else load_params()
        self.model_id = f"ragaudit-support:{self.params['encoder']}"
        self._encoder = encoder
        self._names = list(self.params["features"])
        self._mean = np.asarray(self.params["mean"], dtype=np.float64)
        self._scale = np.asarray(self.params["scale"], dtype=np.float64)
        self._weights = np.asarray(self.params["weights"], dtype=np.float64)

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = make_encoder(self.params["encoder"])
        return self._encoder

    def score(self, segment: str, cited_texts: Sequence[str]) -> float:
        return float(self.score_many([(segment, cited_texts)])[0])

    def score_many(self, pairs: Sequence[tuple[str, Sequence[str]]]) -> np.ndarray:
        """Support of each pair in [0, 1]; 0.0 where the segment or its cited texts are empty.
        Every distinct text of all pairs is encoded once, in one length-sorted batch."""
        prepared = [_prepare(seg, cited) for seg, cited in pairs]
        out = np.zeros(len(prepared), dtype=np.float64)
        if any(p is not None for p in prepared):
            for i, row in enumerate(_featurise(prepared, self.encoder)):
                if row is not None:
                    out[i] = self.probability(row)
        return out

    def probability(self, row: dict[str, float]) -> float:
        z = (np.array([row[n] for n in self._names]) - self._mean) / self._scale
        return _sigmoid(self.params["intercept"] + self.params["slope"] * float(self._weights @ z))


_default: SupportScorer | None = None
_default_lock = threading.Lock()


def _default_scorer() -> SupportScorer:
    global _default
    with _default_lock:
        if _default is None:
            _default = SupportScorer()
    return _default


def support_scores(pairs: Sequence[tuple[str, Sequence[str]]]) -> list[float]:
    """Support of each (segment, cited texts) pair in [0, 1], from the bundled scorer; offline, CPU.
    Score many pairs in one call: every distinct text across them is embedded once, in batches.

    >>> support_scores([("Keys are rotated every 12 months.", []), ("", ["Keys rotate yearly."])])
    [0.0, 0.0]
    """
    return [float(s) for s in _default_scorer().score_many(pairs)]


def support_score(segment: str, cited_texts: Sequence[str]) -> float:
    """How well `cited_texts` support `segment`, in [0, 1] (a calibrated probability); offline, CPU.
    A convenience for one pair: for many, `support_scores` is far cheaper (one batched encode).

    >>> support_score("Keys are rotated every 12 months.", [])
    0.0
    """
    return support_scores([(segment, cited_texts)])[0]


class Scorer(Protocol):
    """A support scorer as its callers read it: the support of each (segment, cited texts) pair, in [0, 1]."""

    def score_many(self, pairs: Sequence[tuple[str, Sequence[str]]]) -> Iterable[float]: ...


class Memoized:
    """A support scorer that scores each distinct (segment, cited texts) pair once for as long as it
    lives (up to `size` pairs, the oldest forgotten first): across the runs of an audit the same
    answer is scored against the same snippets over and over. Scores are a pure function of the
    pair, so a remembered score is the score."""

    def __init__(self, scorer: Scorer, size: int = 200_000):
        self.scorer, self.size = scorer, size
        self.model_id: str | None = getattr(scorer, "model_id", None)
        self._memo: dict[tuple[str, tuple[str, ...]], float] = {}
        forgets(self)

    def forget(self) -> None:
        """Let go of every remembered score (`ragaudit.core.forgetting`)."""
        self._memo = {}

    def score_many(self, pairs: Sequence[tuple[str, Sequence[str]]]) -> list[float]:
        known = self._memo  # this call's, even if forgotten meanwhile
        keys = [(seg, tuple(texts)) for seg, texts in pairs]
        todo = list(dict.fromkeys(k for k in keys if k not in known))
        if todo:
            fresh = self.scorer.score_many([(seg, list(texts)) for seg, texts in todo])
            known.update(zip(todo, (float(v) for v in fresh)))
        scores = [known[k] for k in keys]
        for old in list(known)[: max(0, len(known) - self.size)]:
            del known[old]
        return scores


def make_support_scorer(
    model: str | None, *, params: str | None = None, encoder: Encoder | None = None
) -> SupportScorer | CrossEncoderScorer:
    """The configured support scorer (`[support] model`): None or "" gives the bundled scorer (over
    `encoder`, with `params` as its calibration file if given); a folder path gives a CrossEncoderScorer
    (calibrated by the `params` file if given). Every scorer has `model_id` and `score_many(pairs)`."""
    if not model:
        if not params:
            return SupportScorer(encoder)
        try:
            return SupportScorer(encoder, load_params(Path(params)))
        except (OSError, ValueError) as exc:
            problem = Problem(str(params), f"expected support params for the bundled scorer, found {exc}")
            raise InputError(problem) from exc
    calibration = None
    if params:
        from ragaudit.io.jsonfiles import read_json_file

        calibration = read_json_file(Path(params), what="calibration file")
        check_calibration(calibration, str(params))
    return CrossEncoderScorer(model, calibration)
