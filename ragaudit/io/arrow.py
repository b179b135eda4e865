"""Arrow's allocator for a command of ours, chosen once by the command line (library code leaves it
to the process that uses it)."""

import importlib.util
import os
import sys
from pathlib import Path


def use_jemalloc() -> None:
    """jemalloc for Arrow, in this process and in the worker processes it starts, when the installed
    pyarrow has it and ARROW_DEFAULT_MEMORY_POOL chooses no other. Arrow's default, mimalloc, keeps
    what the reads of runs.parquet free for later; jemalloc hands it back, and a large audit's peak
    memory is tens of MB lower for it. Arrow reads the variable once, as pyarrow is first imported:
    a process that imported it already keeps its allocator."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL") or "pyarrow" in sys.modules:
        return
    if built_with_jemalloc():
        os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "jemalloc"


def built_with_jemalloc() -> bool:
    """Whether the installed pyarrow has jemalloc, as its build configuration says, without importing
    it (an unknown backend in the variable would make Arrow warn on every command)."""
    spec = importlib.util.find_spec("pyarrow")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        try:
            config = (Path(folder) / "include" / "arrow" / "util" / "config.h").read_text(errors="replace")
        except OSError:
            continue
        return "#define ARROW_JEMALLOC\n" in config
    return False
