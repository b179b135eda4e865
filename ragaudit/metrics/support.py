"""Support of an answer segment by its cited texts (SPEC §3), and number-agreement hallucination flags.

The score is the probability from a logistic link over a non-negative combination of features of
the segment and its evidence: sentence-embedding cosines (the bundled MiniLM encoder), recall of
the segment's content words, bigrams and capitalised names, and agreement of its numbers. Being
non-negative, it never falls when a feature rises. Weights, the features' standardisation and the
link live in `support_params.json`, written by `bench/calibrate_support.py` from expert labels
(ExpertQA); plain JSON numbers, so a score can be recomputed by hand.
"""
from __future__ import annotations

import json
import math
import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from ragaudit.metrics.embed import Encoder, make_encoder
from ragaudit.text import sentences

PARAMS_PATH = Path(__file__).with_name("support_params.json")

# ---------------------------------------------------------------- numbers

# Any bracketed group is a citation marker in some style: [3], [1, 2], [pol-keys-1], [Data: Reports (4)].
_MARKER = re.compile(r"\[[^\[\]\n]{0,200}\]|【[^】\n]{0,200}】")
_BULLET = re.compile(r"^\s*\d+[.)]\s+", re.MULTILINE)
_SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
# A number not glued to a word on its left (H2O, MP3, COVID-19 are names, not quantities).
_NUMBER = re.compile(
    r"(?<![\w.])(?<![A-Za-z]-)(?P<cur>[$€£¥])?\s?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)*|\.\d+)"
    r"(?P<pct>\s?%)?(?:\s(?P<scale>thousand|million|billion|trillion)\b)?", re.IGNORECASE)
_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split())}
_WORDS.update({w: 10 * i for i, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), 3)})
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_WORDS) + r")\b", re.IGNORECASE)


def _canonical(value: float) -> str:
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"


def normalise_number(text: str) -> str:
    """The canonical form of the first number written in `text`: `$1,499`, `1499` and `1499.0` all
    give `1499`; `12%` and `12 %` give `12` (a unit never makes two numbers differ); `1.5 million`
    gives `1500000`; version-like `3.10.2` stays as written."""
    match = _NUMBER.search(text.strip())
    if match is None:
        raise ValueError(f"The 'text' parameter must contain a number. Got {text!r} instead.")
    return _values(match)[0]


def _values(match: re.Match) -> list[str]:
    """The number's canonical value, then its mantissa when a scale word multiplies it."""
    raw = match.group("num").replace(",", "")
    if raw.count(".") > 1:
        return [raw]
    value = float(raw)
    scale = match.group("scale")
    if scale:
        return [_canonical(value * _SCALE[scale.lower()]), _canonical(value)]
    return [_canonical(value)]


def _numbers(text: str) -> list[tuple[str, list[str]]]:
    return [(m.group().strip(), _values(m)) for m in _NUMBER.finditer(text)]


def _segment_numbers(segment: str) -> list[tuple[str, list[str]]]:
    # citation markers and list numbering are not claims; the cited texts keep every number they have
    return _numbers(_BULLET.sub(" ", _MARKER.sub(" ", segment)))


def _evidence_values(cited_texts: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for text in cited_texts:
        for _, values in _numbers(text):
            found.update(values)
        found.update(str(_WORDS[w.lower()]) for w in _NUMBER_WORD.findall(text))
    return found


def hallucinated_numbers(segment: str, cited_texts: Sequence[str]) -> list[str]:
    """Numbers written in `segment` (as written, each once) that no cited text contains after
    normalisation. Citation markers (`[3]`, `[pol-keys-1]`) and list numbering are skipped, as are
    digits glued to a word (`H2O`, `COVID-19`); a cited `four` covers a written `4`, and a cited
    `1.5 million` covers a written `1,500,000` and `1.5 million` alike."""
    evidence = _evidence_values(cited_texts)
    out: list[str] = []
    seen: set[str] = set()
    for surface, values in _segment_numbers(segment):
        if not evidence.intersection(values) and values[0] not in seen:
            out.append(surface)
        seen.add(values[0])
    return out


# ---------------------------------------------------------------- text

_STOP = frozenset("""a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each either else etc ever every few
for from further had has have having he her here hers herself him himself his how however i if in into is it
its itself just may me might more most much must my myself no nor not now of off often on once one only or
other our ours ourselves out over own per same shall she should so some such than that the their theirs them
themselves then there these they this those through thus to too under until up upon us very via was we were
what when where whether which while who whom whose why will with within without would yet you your yours""".split())
_WORD = re.compile(r"[^\W_]+")
_MARKUP = re.compile(r"[*#_`>|]+|^\s*(?:[-•]|\d+[.)])\s+", re.MULTILINE)


def clean(text: str) -> str:
    """The text without citation markers, markdown emphasis or list bullets, whitespace collapsed."""
    return " ".join(_MARKUP.sub(" ", _MARKER.sub(" ", text)).split())


@lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    # a crude suffix stripper is enough to match "rotated"/"rotation"/"rotates" on both sides
    for suffix in ("ational", "ations", "ation", "ities", "ity", "ments", "ment", "ness", "ings", "ing",
                   "ies", "ied", "ers", "er", "ed", "es", "ly", "s", "e", "al"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[:-len(suffix)]
    return word


def content_stems(text: str) -> list[str]:
    return [_stem(w) for w in (t.lower() for t in _WORD.findall(text)) if w not in _STOP and not w.isdigit()]


def _capitalised(text: str) -> set[str]:
    # capitalised words that do not open a sentence: names, places, organisations, acronyms
    out = set()
    for sentence in re.split(r"(?<=[.!?:])\s+|\n", text):
        words = _WORD.findall(sentence)
        out.update(w.lower() for w in words[1:] if w[0].isupper() and w.lower() not in _STOP)
    return out


def units(text: str) -> list[str]:
    """Sentences and lines of a cited text, markup removed, without fragments of fewer than 3 words."""
    found = [clean(s) for s in sentences(text)]
    kept = [u for u in found if len(u.split()) >= 3]
    return kept or [u for u in found if u]


# ---------------------------------------------------------------- features

# Every feature grows with support, so any non-negative combination of them is monotone.
EMBEDDING = ("cos_max", "cos_top3", "cos_window", "cos_passage", "cos_mean", "cos_cover", "cos_chunk")
LEXICAL = ("word_recall", "bigram_recall", "local_recall", "caps_recall", "number_recall")
FEATURES = (*EMBEDDING, *LEXICAL, "lex_overlap")
_CHUNK = 24  # words per fixed-size window: a view of the evidence that does not depend on punctuation


@dataclass(frozen=True, slots=True)
class _Pair:
    raw_segment: str
    raw_cited: tuple[str, ...]
    seg: str
    seg_sents: list[str]
    passages: list[str]
    units: list[str]
    windows: list[str]
    chunks: list[str]

    def texts(self) -> list[str]:
        return [self.seg, *self.seg_sents, *self.passages, *self.units, *self.windows, *self.chunks]


def _chunks(text: str) -> list[str]:
    words = text.split()
    if len(words) <= _CHUNK:
        return [text]
    step = _CHUNK // 2
    return [" ".join(words[i:i + _CHUNK]) for i in range(0, len(words) - _CHUNK + step, step)]


def _prepare(segment: str, cited_texts: Sequence[str]) -> _Pair | None:
    """The texts to embed for one pair, or None when the segment or its evidence is empty."""
    seg = clean(segment)
    passages = [c for c in (clean(t) for t in cited_texts) if c]
    if not seg or not passages:
        return None
    per_text = [units(t) for t in cited_texts]
    ev_units = [u for found in per_text for u in found]
    windows = [a + " " + b for found in per_text for a, b in zip(found, found[1:])]
    seg_sents = [s for s in map(clean, sentences(segment)) if len(s.split()) >= 3]
    return _Pair(segment, tuple(cited_texts), seg, seg_sents or [seg], passages, ev_units,
                 windows or ev_units, [c for p in passages for c in _chunks(p)])


def _recall(needles, haystack: set) -> float:
    needles = list(dict.fromkeys(needles))
    return sum(1 for n in needles if n in haystack) / len(needles) if needles else 1.0


def _features(p: _Pair, vec) -> dict[str, float]:
    seg = vec([p.seg])[0]
    unit_vectors = vec(p.units)
    sims = np.sort(unit_vectors @ seg)[::-1]
    cover = (vec(p.seg_sents) @ unit_vectors.T).max(axis=1)

    seg_stems = content_stems(p.seg)
    evidence = "\n".join(p.passages)
    ev_stems = content_stems(evidence)
    ev_tokens = {t.lower() for t in _WORD.findall(evidence)}
    numbers = _segment_numbers(p.raw_segment)
    missing = hallucinated_numbers(p.raw_segment, p.raw_cited)
    return {
        "cos_max": float(sims[0]),
        "cos_top3": float(sims[:3].mean()),
        "cos_window": float((vec(p.windows) @ seg).max()),
        "cos_passage": float((vec(p.passages) @ seg).max()),
        "cos_mean": float(sims.mean()),
        "cos_cover": float(cover.min()),
        "cos_chunk": float((vec(p.chunks) @ seg).max()),
        "word_recall": _recall(seg_stems, set(ev_stems)),
        "bigram_recall": _recall(zip(seg_stems, seg_stems[1:]), set(zip(ev_stems, ev_stems[1:]))),
        "local_recall": max(_recall(seg_stems, set(content_stems(w))) for w in p.windows),
        "caps_recall": _recall(sorted(_capitalised(p.seg)), ev_tokens | {_stem(t) for t in ev_tokens}),
        "number_recall": 1.0 - len(missing) / len(numbers) if numbers else 1.0,
        "lex_overlap": _recall((t.lower() for t in _WORD.findall(p.seg)), ev_tokens),
    }


def _featurise(prepared: list[_Pair | None], encoder: Encoder) -> list[dict[str, float] | None]:
    distinct = list(dict.fromkeys(t for p in prepared if p is not None for t in p.texts()))
    matrix = encoder.encode(distinct) if distinct else None
    row = {t: i for i, t in enumerate(distinct)}

    def vec(texts: list[str]) -> np.ndarray:
        return matrix[[row[t] for t in texts]]

    return [None if p is None else _features(p, vec) for p in prepared]


def feature_rows(pairs: Sequence[tuple[str, Sequence[str]]], encoder: Encoder) -> list[dict[str, float] | None]:
    """Every feature of each (segment, cited texts) pair, None where either side is empty; each
    distinct text, sentence and window is encoded once across all pairs."""
    return _featurise([_prepare(seg, cited) for seg, cited in pairs], encoder)


# ---------------------------------------------------------------- the calibrated scorer

def load_params(path: Path = PARAMS_PATH) -> dict:
    """The shipped calibration, checked against the features this module computes."""
    params = json.loads(Path(path).read_text(encoding="utf-8"))
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


class SupportScorer:
    """P(the cited texts completely support the segment), from the shipped calibration.

    p = sigmoid(intercept + slope * sum_k weight_k * (feature_k - mean_k) / scale_k). The encoder
    defaults to the model the calibration was fitted with, created on first use.
    """

    def __init__(self, encoder: Encoder | None = None, params: dict | None = None):
        self.params = params if params is not None else load_params()
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
        """Support of each pair in [0, 1]; 0.0 where the segment or its cited texts are empty."""
        prepared = [_prepare(seg, cited) for seg, cited in pairs]
        out = np.zeros(len(prepared), dtype=np.float64)
        if any(p is not None for p in prepared):
            for i, row in enumerate(_featurise(prepared, self.encoder)):
                if row is not None:
                    out[i] = self.probability(row)
        return out

    def probability(self, row: dict[str, float]) -> float:
        z = (np.array([row[n] for n in self._names]) - self._mean) / self._scale
        logit = self.params["intercept"] + self.params["slope"] * float(self._weights @ z)
        return 1.0 / (1.0 + math.exp(-logit)) if logit > -700 else 0.0


_default: SupportScorer | None = None
_default_lock = threading.Lock()


def support_score(segment: str, cited_texts: Sequence[str]) -> float:
    """How well `cited_texts` support `segment`, in [0, 1] (a calibrated probability); offline, CPU.

    >>> support_score("Keys are rotated every 12 months.", [])
    0.0
    """
    global _default
    with _default_lock:
        if _default is None:
            _default = SupportScorer()
    return _default.score(segment, cited_texts)
