"""Measuring a command from the outside: wall time, the peak RSS of its largest process (the
kernel's, from wait4) and of all its processes together (sampled from /proc)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time


def _tree_rss_kb(root: int) -> int:
    """Resident KB of `root` and its descendants now (Linux /proc; 0 elsewhere)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            parents[int(entry)] = int(fields[1])
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE") // 1024
        except (OSError, IndexError, ValueError):
            continue
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    return sum(rss.get(pid, 0) for pid in tree)


def measure(
    command: list[str], env: dict | None = None, ok: tuple[int, ...] = (0, 1)
) -> tuple[float, float, float, int]:
    """(seconds, peak RSS MB of its largest process, peak RSS MB of all its processes, exit code);
    an exit code not in `ok` ends the benchmark with the command's stderr."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    peak_tree = [0]
    done = threading.Event()

    def sample():
        while not done.wait(0.05):
            peak_tree[0] = max(peak_tree[0], _tree_rss_kb(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stderr = proc.stderr.read()  # the child may write much; never let the pipe fill
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    done.set()
    sampler.join()
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    if code not in ok:
        sys.exit(f"{' '.join(command)} exited {code}:\n{stderr.decode(errors='replace')[-2000:]}")
    # wait4's ru_maxrss is that of the largest process of the child's tree (workers are reaped by it)
    return seconds, usage.ru_maxrss / 1024.0, peak_tree[0] / 1024.0, code
