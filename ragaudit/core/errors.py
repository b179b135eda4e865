"""Named exceptions for what stops a command. Bad data inside a readable file becomes Issues instead."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One located defect of an input: file, line, JSON path, what was expected, what was found."""

    file: str
    message: str
    line: int | None = None
    path: str | None = None

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        if self.path and self.path != "$":
            where += f": {self.path}"
        return f"{where}: {self.message}"


class RagauditError(Exception):
    """Base of every error that ends a command; `exit_code` follows docs/reference.md §7."""

    exit_code = 1


class UsageError(RagauditError):
    """The command line or a parameter is wrong."""

    exit_code = 2


class MissingExtraError(UsageError):
    """A feature whose optional dependencies this install lacks; the message names the extra that adds them."""


# PyPI's torch for Linux is the CUDA build, some 4.5 GB of GPU libraries; ragaudit runs its models on the
# CPU, so the install it names takes PyTorch's CPU build first, which `ragaudit[model]` then keeps.
CPU_TORCH = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def install_command(extra: str) -> str:
    """The one command that installs `extra` (the README's): for `model`, the CPU build of PyTorch first."""
    command = f"pip install 'ragaudit[{extra}]'"
    return f"{CPU_TORCH} && {command}" if extra == "model" else command


def require(module: str, *, extra: str, purpose: str, error: type[RagauditError] = MissingExtraError) -> None:
    """Raise `error` naming the command that installs `extra` when the optional `module` is not installed.
    Checks without importing it: the import itself stays where the work is."""
    from importlib.util import find_spec

    if find_spec(module) is None:
        raise error(f"{purpose} needs {module}, which is not installed: {install_command(extra)}")


class InputError(RagauditError):
    """An input file is missing, unreadable or invalid; carries every problem found, not just the first."""

    exit_code = 3

    def __init__(self, problems: list[Problem] | list[Problem | str] | Problem | str):
        self.problems: list[Problem | str] = [problems] if isinstance(problems, (Problem, str)) else list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class PipelineStartError(RagauditError):
    """A pipeline could not be started or reached."""

    exit_code = 4


class InputsChangedError(RagauditError):
    """`verify`: an input changed since the run."""

    exit_code = 5


INTERRUPTED = 130  # 128 + SIGINT: ctrl-C outside a run's own handler


def failure(exc: BaseException) -> tuple[int, list[str]]:
    """The exit code of an error that ends a command (a RagauditError, ctrl-C, an OSError such as
    a full disk or a read-only folder: an input/output error), and its message for stderr, one
    line per problem."""
    if isinstance(exc, InputError):
        return exc.exit_code, [f"error: {p}" for p in exc.problems]
    if isinstance(exc, RagauditError):
        return exc.exit_code, [f"error: {exc}"]
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED, ["error: interrupted by SIGINT"]
    where = f"{exc.filename}: " if isinstance(exc, OSError) and exc.filename else ""
    return InputError.exit_code, [f"error: input/output: {where}{getattr(exc, 'strerror', None) or exc}"]


def clip(text: str, width: int = 50) -> str:
    """`text` shortened to `width` characters for a message."""
    return text if len(text) <= width else text[: width - 3] + "..."


def describe(value: object) -> str:
    """A short description of a JSON value for 'found …' messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"string {clip(value, 40)!r}"
    if isinstance(value, list):
        return f"array of {len(value)}"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
