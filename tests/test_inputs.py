"""One way to build what a run shares: `Inputs.from_config` loads the gold set and corpus; the
encoder, the support scorer and the validation context are each built on first use, once, however
many threads ask, and shared by a copy with another config."""

import dataclasses
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import BM25, write_config

import ragaudit.checks.metrics.embed
import ragaudit.checks.metrics.support
import ragaudit.pipelines.inputs
from ragaudit.core.errors import UsageError
from ragaudit.io.config import Config, load_config
from ragaudit.io.config_schema import GateSection
from ragaudit.pipelines.inputs import Inputs


def test_the_models_and_the_context_are_built_once_on_first_use(tmp_path, monkeypatch):
    built: Counter = Counter()
    gate = threading.Barrier(8)

    def counted(name, real):
        def make(*args, **kwargs):
            built[name] += 1
            time.sleep(0.05)  # long enough for every thread to ask while the first one builds
            return real(*args, **kwargs)

        return make

    monkeypatch.setattr(
        ragaudit.checks.metrics.embed, "make_encoder", counted("encoder", ragaudit.checks.metrics.embed.make_encoder)
    )
    monkeypatch.setattr(
        ragaudit.checks.metrics.support,
        "make_support_scorer",
        counted("support", ragaudit.checks.metrics.support.make_support_scorer),
    )
    inputs = Inputs.from_config(load_config(write_config(tmp_path, BM25, items=2)))
    assert not built and len(inputs.items) == 2 and inputs.corpus.documents  # loading builds no model

    def ask(_):
        gate.wait()
        return inputs.support, inputs.encoder, inputs.context

    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(ask, range(8)))
    assert built == {"encoder": 1, "support": 1}
    assert all(all(a is b for a, b in zip(f, found[0])) for f in found)
    regated = dataclasses.replace(inputs.config, gate=GateSection(pipelines=["bm25"]))
    other = inputs.replace(config=regated)
    assert other.config.gate.pipelines == ["bm25"] and other.items == inputs.items and other.corpus is inputs.corpus
    assert other.encoder is inputs.encoder and other.support is inputs.support
    assert built == {"encoder": 1, "support": 1}


def test_a_config_without_gold_or_corpus_is_a_usage_error():
    with pytest.raises(UsageError, match=r"\[audit\] needs gold and corpus paths"):
        Inputs.from_config(Config())


def test_an_audits_encoder_holds_a_bounded_number_of_vectors(tmp_path, monkeypatch):
    monkeypatch.setattr(ragaudit.pipelines.inputs, "VECTORS_HELD", 5)  # read when Inputs is built
    monkeypatch.setenv("RAGAUDIT_CACHE", str(tmp_path / "cache"))
    config = load_config(write_config(tmp_path, BM25, items=2))
    encoder = Inputs.from_config(config).encoder
    texts = [f"distinct text number {i}" for i in range(12)]
    first = encoder.encode(texts)
    assert len(encoder._memory) <= 5  # the others wait in the cache file, not in memory
    assert (encoder.encode(texts) == first).all()  # and come back from it the same
