"""A Dask cluster's tasks as `ragaudit.auditing.executors.DaskClient` hands them out, and the watch on
its workers that ends every wait on a cluster that lost them all (see `ragaudit.auditing.executors`)."""

from __future__ import annotations

import threading
import time
from typing import Any

from ragaudit.core.execution import ClusterLost, WorkerDied

LOOK_S = 1.0  # how often a wait on a Dask task looks whether the cluster still has workers


class DaskWorkers:
    """Whether a Dask cluster still has a worker, looked at (at most every LOOK_S) by whoever waits
    on one of its tasks. Once it has had none for `wait_s` seconds it is lost for good, and says
    which workers it had."""

    def __init__(self, client: Any, wait_s: float):
        self.client, self.wait_s = client, wait_s
        self.seen: dict[str, None] = {}  # every worker the cluster had, in the order first seen
        self.empty_since: float | None = None
        self.looked = float("-inf")
        self.lost: str | None = None
        self._lock = threading.Lock()
        self._look()  # the workers it has as the run starts

    def verdict(self) -> ClusterLost | None:
        """ClusterLost once the cluster is lost (a fresh one each time: threads raise it at once)."""
        return ClusterLost(self.lost) if self.lost is not None else None

    def check(self) -> ClusterLost | None:
        """Look at the cluster's workers, unless another thread is looking or one looked just now."""
        if self.lost is None and self._lock.acquire(blocking=False):
            try:
                if time.monotonic() - self.looked >= LOOK_S:
                    self._look()
            finally:
                self._lock.release()
        return self.verdict()

    def _look(self) -> None:
        try:
            workers = list(self.client.nthreads(callback_timeout=5 * LOOK_S))
        except (OSError, TimeoutError):  # a scheduler that does not answer reaches no worker either
            workers = []
        now = self.looked = time.monotonic()
        if workers:
            self.seen.update(dict.fromkeys(sorted(workers)))
            self.empty_since = None
        elif self.empty_since is None:
            self.empty_since = now
        elif now - self.empty_since >= self.wait_s:
            self.lost = self.said()

    def said(self, *, none_came: bool = False) -> str:
        address = getattr(getattr(self.client, "scheduler", None), "address", None) or "(unknown address)"
        within = f"within {self.wait_s:g} s ([executor] worker_wait_s)"
        if none_came or not self.seen:
            return f"no worker of the Dask cluster at {address} could be reached {within}"
        had = list(self.seen)
        shown = ", ".join(had[:10]) + (f" and {len(had) - 10} more" if len(had) > 10 else "")
        return f"every worker of the Dask cluster at {address} is gone ({shown}) and none came back {within}"


class DaskTask:
    """A Dask future as a task: a task the cluster gave up on after its workers died raises
    WorkerDied, and one on a cluster that lost every worker ClusterLost; the cluster forgets the
    result once it is read."""

    def __init__(self, future: Any, watch: DaskWorkers):
        self.future, self.watch = future, watch

    def result(self, timeout: float | None = None) -> Any:
        from distributed import KilledWorker

        try:
            return self._wait(timeout)
        except KilledWorker as exc:
            tries = getattr(exc, "allowed_failures", None)
            raise WorkerDied(tries + 1 if isinstance(tries, int) else 0) from None
        finally:
            if self.future.done():
                self.future.release()

    def _wait(self, timeout: float | None) -> Any:
        """The future's result, waited for a slice at a time: between slices, whether the cluster
        still has a worker to run it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = LOOK_S if deadline is None else min(LOOK_S, max(deadline - time.monotonic(), 0.0))
            try:
                return self.future.result(left)
            except TimeoutError:
                if self.future.done():  # it ended as the slice did (or the task raised TimeoutError itself)
                    return self.future.result()
                if (lost := self.watch.check()) is not None:
                    self.future.cancel()
                    raise lost from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    def done(self) -> bool:
        done: bool = self.future.done()
        return done

    def cancel(self) -> bool:
        self.future.cancel()
        return True
