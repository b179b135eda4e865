"""Writing files so that a crash or a full disk never leaves half of one: everything goes to a
temporary name in the same folder and is renamed into place (an atomic replace on POSIX).

What an output may replace: nothing (a new file) or a regular file. A symlink is written
through: the file it points to is replaced and the link stays. A FIFO, a device, a socket or a
folder is refused (InputError, exit 3) before anything is written. The new file gets the mode
the umask gives a new file (0666 & ~umask), as a shell redirection would. An output that is one
of the command's inputs (the same file by any path) is refused by `refuse_overwriting`.

What a hash reads: regular files only, each up to the size it has when opened. A FIFO would wait
for a writer and a device may never end, so `sha256_file` refuses them before opening (`NotAFile`,
exit 3), and a folder's hash never follows a symlink out of the folder (`sha256_file`,
`sha256_within`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

from ragaudit.core.errors import InputError, Problem, UsageError

HASH_VERSION = 2  # 1: a folder's files as `name \0 content`, 2: length-prefixed names and content digests
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotAFile(InputError):
    """A path read as a file that is none: a FIFO, a device, a socket, a folder, or a symlink that
    leads out of the folder it must stay in. Nothing was opened."""


def kind_of(mode: int) -> str:
    """What a file of this `st_mode` is, in words: `a FIFO (named pipe)`, `a folder`, ..."""
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def inside(folder: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Whether `path`, its symlinks followed, lies inside the folder `folder` (its own symlinks followed)."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """`path` opened for binary reading when it is a regular file (through symlinks); anything else
    is NotAFile, before it is opened. The open itself cannot wait either (O_NONBLOCK, in case the
    path became a FIFO meanwhile)."""
    name = os.fspath(path)
    mode = os.stat(name).st_mode
    if not stat.S_ISREG(mode):
        raise NotAFile(Problem(name, f"expected a regular file, found {kind_of(mode)}: not read"))
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotAFile(Problem(name, f"expected a regular file, found {kind_of(mode)}: not read"))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def umask() -> int:
    """The process's umask, read without changing it where the system says it (Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def output_target(path: str | os.PathLike[str]) -> Path:
    """The file writing `path` replaces: `path` itself, or the file a symlink there points to.
    Raises InputError when that is not a regular file (a FIFO, a device, a folder, a socket)."""
    real = Path(os.path.realpath(path))
    try:
        found = os.stat(real).st_mode
    except FileNotFoundError:
        return real
    if stat.S_ISREG(found):
        return real
    kind = kind_of(found)
    via = f" (the target of the symlink {os.fspath(path)})" if real != Path(os.path.abspath(path)) else ""
    raise InputError(Problem(str(real), f"expected a regular file to write{via}, or none, found {kind}"))


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside the file `path` names (through a symlink); when the block ends
    without error, it replaces that file with the umask's mode. On any error the temporary file
    is removed and the target is left as it was. Raises InputError, before the block runs, when
    the target is not a regular file."""
    target = output_target(path)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except (FileNotFoundError, NotADirectoryError):
        raise InputError(
            Problem(str(target.parent), f"expected a folder to write {target.name} in, found none")
        ) from None
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~umask())
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, output_target(path))  # checked again: the target may have changed meanwhile
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def sqlite_errors(doing: str, path: str | os.PathLike[str]) -> Iterator[None]:
    """An SQLite error inside the block (a full disk, a file that cannot be made) as the
    input-output error it is (exit 3), saying what could not be done and naming the file."""
    import errno
    import sqlite3

    try:
        yield
    except sqlite3.Error as exc:
        full = getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
        raise OSError(errno.ENOSPC if full else errno.EIO, f"cannot {doing}: {exc}", os.fspath(path)) from None


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write `data` (text as UTF-8) to `path` through a temporary file and a rename."""
    with atomic_path(path) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether `a` and `b` name one file: by any relative path, symlink or hard link."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare where they lead
        return os.path.realpath(a) == os.path.realpath(b)


def refuse_overwriting(
    outputs: Iterable[str | os.PathLike[str]], inputs: Iterable[str | os.PathLike[str] | None], *, option: str = "--out"
) -> None:
    """Raise UsageError (exit 2) when an output is one of the inputs, or lies inside an input
    folder (writing it would change that input), or is a file a run directory stamped (its
    manifest, traces or outputs: only its run writes them)."""
    from ragaudit.io.runfiles import run_of

    named = [Path(i) for i in inputs if i is not None]
    for output in map(Path, outputs):
        for source in named:
            within = source.is_dir() and inside(source, output)
            if within or same_file(output, source):
                raise UsageError(
                    f"{option} {output}: expected an output that is not an input, found "
                    + (f"it inside the input folder {source}" if within else f"the input {source}")
                )
        run_dir = run_of(output)
        if run_dir is not None:
            raise UsageError(
                f"{option} {output}: expected an output that is not one of a run's own files, found "
                f"{os.path.realpath(output)}: only the run {run_dir} writes it, and its manifest stamps it"
            )


def _framed(text: str) -> bytes:
    data = text.encode("utf-8", "surrogateescape")
    return len(data).to_bytes(8, "big") + data


def folder_digest(folder: Path, names: Iterable[str], *, follow: bool = True) -> hashlib._Hash:
    """sha256 over the files `names` of `folder` (relative, `/`-separated), in the order given:
    each file as its length-prefixed name and the sha256 of its content, so that no moving of
    bytes between names and files gives the same digest. Without `follow`, a file that is a
    symlink leading out of the folder is not opened: its link text stands for its content."""
    digest = hashlib.sha256()
    for name in names:
        inner = hashlib.sha256()
        _add_content(inner, folder, name, follow)
        digest.update(_framed(name) + inner.digest())
    return digest


def _add_content(digest: hashlib._Hash, folder: Path, name: str, follow: bool) -> None:
    """Add the file `name` of `folder` to `digest`: its bytes, or (without `follow`) the link text
    of a symlink that leads out of the folder, which is not opened."""
    path = folder / name
    if not follow and path.is_symlink() and not inside(folder, path):
        digest.update(b"symlink out of the folder to " + os.fsencode(os.readlink(path)))
        return
    _hash_regular(digest, path)


def _hash_blocks(digest: hashlib._Hash, handle: BinaryIO, size: int | None = None) -> None:
    """Add what is left of an open binary file to `digest`, a megabyte at a time: at most `size`
    bytes when given, so that a file that never ends (a kernel's pseudo-file) is read no further
    than the size it had when opened."""
    left = size
    while left is None or left > 0:
        block = handle.read(1 << 20 if left is None else min(1 << 20, left))
        if not block:
            return
        digest.update(block)
        if left is not None:
            left -= len(block)


def _hash_regular(digest: hashlib._Hash, path: Path) -> None:
    """Add a regular file's bytes to `digest`, up to the size it has when opened (NotAFile else)."""
    with open_regular(path) as handle:
        _hash_blocks(digest, handle, os.fstat(handle.fileno()).st_size)


def sha256_file(path: Path, *, version: int = HASH_VERSION, follow: bool = False) -> str:
    """sha256 of a regular file, or of a folder's regular files in name order (see `folder_digest`;
    a symlink out of the folder counts as its link text unless `follow`; `version` 1 hashes a
    folder the old way, names and contents run together, for manifests that recorded it). A FIFO,
    a device or a socket is NotAFile, never opened."""
    path = Path(path)
    if not path.is_dir():
        return _sha256_regular(path)
    names = [p.relative_to(path).as_posix() for p in sorted(p for p in path.rglob("*") if p.is_file())]
    if version >= 2:
        return folder_digest(path, names, follow=follow).hexdigest()
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode() + b"\0")
        _add_content(digest, path, name, follow)
    return digest.hexdigest()


def sha256_within(folder: Path, name: str) -> str:
    """sha256 of the file `name` of `folder`, which must stay inside it: a symlink leading out of
    the folder is NotAFile, never opened, as is anything but a regular file."""
    path = Path(folder) / name
    if not inside(folder, path):
        raise NotAFile(
            Problem(str(path), f"expected a file of {folder}, found a symlink to {os.path.realpath(path)}: not read")
        )
    return _sha256_regular(path)


def _sha256_regular(path: Path) -> str:
    digest = hashlib.sha256()
    _hash_regular(digest, path)
    return digest.hexdigest()


def dumps(value: object) -> str:
    """A report-like value as JSON text, keys sorted; NaN and infinities are refused (JSON has none)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def write_json(path: str | os.PathLike[str], value: object) -> None:
    write_atomic(path, dumps(value))


WRITE_BUFFER = 1 << 20  # bytes: lines of a few KB each go to the file a megabyte at a time, not one by one


class DigestedAppend:
    """A text file (UTF-8) opened for appending that keeps the sha256 of all it holds as it is
    written: what was in it first, read once on opening, then every write. A stream of a few GB
    is then hashed while it is written, not read again once it is closed."""

    def __init__(self, path: Path):
        self._digest = hashlib.sha256()
        with open(path, "ab+") as handle:  # created when missing, as "a" does
            handle.seek(0)
            _hash_blocks(self._digest, handle)
        self._file = open(path, "ab", buffering=WRITE_BUFFER)

    def write(self, text: str) -> None:
        data = text.encode("utf-8")
        self._digest.update(data)
        self._file.write(data)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def hexdigest(self) -> str:
        """The sha256 of the file as written so far (`sha256_file` of it once flushed)."""
        return self._digest.hexdigest()

    def __enter__(self) -> DigestedAppend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
