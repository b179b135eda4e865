"""Arrow's allocator for a command of ours, chosen once by the command line (library code leaves it
to the process that uses it)."""

import os


def use_jemalloc() -> None:
    """jemalloc for Arrow, in this process and in the worker processes it starts, when the installed
    pyarrow has it and ARROW_DEFAULT_MEMORY_POOL chooses no other. Arrow's default, mimalloc, keeps
    what the reads of runs.parquet free for later; jemalloc hands it back, and a large audit's peak
    memory is tens of MB lower for it."""
    import pyarrow as pa

    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    if "jemalloc" in pa.supported_memory_backends():
        os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "jemalloc"  # what worker processes read as they start
        pa.set_memory_pool(pa.jemalloc_memory_pool())
