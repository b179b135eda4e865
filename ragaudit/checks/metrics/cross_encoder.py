"""A pluggable support model (docs/reference.md §3, `[support] model`): a local sentence-transformers
CrossEncoder folder (an NLI model or a reranker), calibrated by `bench/calibrate_support.py
--cross-encoder`. `support.make_support_scorer` builds it from a config."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ragaudit.core.errors import InputError, Problem, require
from ragaudit.core.progress import phase
from ragaudit.core.text import clean

if TYPE_CHECKING:
    from sentence_transformers import CrossEncoder

CROSS_ENCODER_SCHEMA = "ragaudit.support_params/1"


def _cross_encoder_config(path: Path) -> dict[str, Any]:
    """config.json of a sentence-transformers CrossEncoder folder, or InputError saying what is there."""
    config_file, config = path / "config.json", None
    if not path.exists():
        found = "no such file or folder"
    elif not path.is_dir():
        found = "a file"
    elif not config_file.is_file():
        found = "a folder without config.json"
    else:
        from ragaudit.io.jsonfiles import read_json_file

        try:
            config = read_json_file(config_file, what="model config", expect=object, finite=False)
            found = "a config.json that is not an object"
        except InputError as exc:
            found = f"an unreadable config.json ({exc})"
    if isinstance(config, dict):
        heads = config.get("architectures") or []
        if not heads or any(h.endswith("ForSequenceClassification") for h in heads):
            return config
        found = f"a {', '.join(heads)} model without a classification head"
    raise InputError(
        Problem(str(path), f"expected a sentence-transformers CrossEncoder folder (config.json), found {found}")
    )


def _entailment_column(path: Path, config: dict[str, Any]) -> int | None:
    """None for a one-logit model (a reranker); else the column of the NLI model's entailment label."""
    # as transformers reads it: id2label when written, else num_labels, else its default of 2
    id2label = {int(k): str(v) for k, v in (config.get("id2label") or {}).items()}
    count = len(id2label) or int(config.get("num_labels") or 2)
    if count == 1:
        return None
    names = [id2label.get(i, f"LABEL_{i}") for i in range(count)]
    for column, name in enumerate(names):
        if name.lower() == "entailment":
            return column
    raise InputError(
        Problem(
            str(path),
            "expected a one-output model (a reranker) or an NLI model with an "
            f"'entailment' label, found labels {names}",
        )
    )


def check_calibration(params: dict[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise InputError(Problem(where, f"expected a calibration object, found {type(params).__name__}"))
    if params.get("schema") != CROSS_ENCODER_SCHEMA or params.get("kind") != "cross-encoder":
        raise InputError(
            Problem(
                where,
                f"expected schema {CROSS_ENCODER_SCHEMA!r} and kind 'cross-encoder', "
                f"found {params.get('schema')!r} and {params.get('kind')!r}",
            )
        )
    for key in ("intercept", "slope"):
        value = params.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InputError(Problem(where, f"expected a finite number in {key!r}, found {value!r}"))
    return params


class CrossEncoderScorer:
    """Support from a local sentence-transformers CrossEncoder (an NLI model or a reranker).

    Each pair reads (segment, cited text) for every cited text and for their join; the score is the
    best of them: the entailment probability of an NLI model, the sigmoid of a reranker's logit.
    With calibration params (written by `bench/calibrate_support.py --cross-encoder`), p =
    sigmoid(intercept + slope * raw). Nothing is downloaded; the model loads on first use.
    """

    def __init__(self, path: str | Path, params: dict[str, Any] | None = None, *, batch_size: int = 16):
        self.path = Path(path).expanduser()
        config = _cross_encoder_config(self.path)
        require("sentence_transformers", extra="model", purpose=f"[support] model {str(self.path)!r}", error=InputError)
        self._entailment = _entailment_column(self.path, config)
        self.params = None if params is None else check_calibration(params, str(self.path))
        self.batch_size = batch_size
        self.model_id = f"cross-encoder:{self.path.name}" + (":calibrated" if params else "")
        self._model: CrossEncoder | None = None
        self._lock = threading.Lock()

    @property
    def model(self) -> CrossEncoder:
        with self._lock:
            if self._model is None:
                with phase("support model load", counts_as="model load"):
                    from sentence_transformers import CrossEncoder

                    # local_files_only reaches the config, the tokenizer and the weights: never the hub
                    self._model = CrossEncoder(str(self.path), device="cpu", local_files_only=True)
        return self._model

    def raw_scores(self, pairs: Sequence[tuple[str, Sequence[str]]]) -> np.ndarray:
        """The uncalibrated score of each pair in [0, 1]; 0.0 where the segment or its evidence is empty."""
        return self._raw(pairs)[0]

    def _raw(self, pairs: Sequence[tuple[str, Sequence[str]]]) -> tuple[np.ndarray, np.ndarray]:
        wanted: list[list[tuple[str, str]]] = []
        for segment, cited in pairs:
            seg, texts = clean(segment), [c for c in map(clean, cited) if c]
            inputs = [(seg, t) for t in texts] + ([(seg, "\n".join(texts))] if len(texts) > 1 else [])
            wanted.append(inputs if seg else [])
        # each distinct input once, longest first, so that a batch pads little
        distinct = sorted(dict.fromkeys(x for inputs in wanted for x in inputs), key=lambda x: -len(x[0]) - len(x[1]))
        probability: dict[tuple[str, str], float] = {}
        if distinct:
            import torch

            logits = self.model.predict(
                distinct,
                batch_size=self.batch_size,
                activation_fn=torch.nn.Identity(),
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            logits = np.asarray(logits, dtype=np.float64).reshape(len(distinct), -1)
            probability = dict(zip(distinct, self._probabilities(logits).tolist()))
        raw = np.array([max((probability[x] for x in inputs), default=0.0) for inputs in wanted], dtype=np.float64)
        return raw, np.array([bool(inputs) for inputs in wanted], dtype=bool)

    def _probabilities(self, logits: np.ndarray) -> np.ndarray:
        if self._entailment is None:
            reranker: np.ndarray = 1.0 / (1.0 + np.exp(-logits[:, 0]))
            return reranker
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        nli: np.ndarray = shifted[:, self._entailment] / shifted.sum(axis=1)
        return nli

    def score(self, segment: str, cited_texts: Sequence[str]) -> float:
        return float(self.score_many([(segment, cited_texts)])[0])

    def score_many(self, pairs: Sequence[tuple[str, Sequence[str]]]) -> np.ndarray:
        """Support of each pair in [0, 1], calibrated when params were given; 0.0 for an empty side."""
        raw, scored = self._raw(pairs)
        if self.params is None:
            return raw
        calibrated = 1.0 / (1.0 + np.exp(-(self.params["intercept"] + self.params["slope"] * raw)))
        return np.where(scored, calibrated, 0.0)
