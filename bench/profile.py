"""A bench worker's profile, every thread of it, in sections the bench names.

temporalio runs workflow activations on a pool of threads and our sync tools on
others, while cProfile watches only the thread that enabled it: a profile of the
event loop's thread alone leaves out the workflow's work. So each thread gets a
profiler of its own as it starts, and a section's profile is all of them added up.

The bench asks a worker for a section with a line on its stdin (``mark A``): what
ran since the last mark is added to ``<prefix>.A.prof`` (a section named twice, as
C's rounds are, adds up) and the profilers start afresh. Read one with

    python -m bench.profile PREFIX.ours.A.prof [--top 30]

which prints the entries that used the most time of their own (wall time, waits set
apart, unless the worker ran with ``BENCH_PROFILE_CLOCK=cpu``), and the share of each
package (ours, temporalio, pydantic, sqlite3, the standard library).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from types import FrameType
from typing import Any


class _Taken:
    """Stats already read from a profiler, in the form pstats loads."""

    def __init__(self, stats: dict[Any, Any]) -> None:
        self.stats = stats

    def create_stats(self) -> None:
        pass


class ThreadProfiles:
    """One profiler for each thread of this process (the current one and every one
    started after), read together by :meth:`mark`."""

    def __init__(self, prefix: str, cpu_clock: bool = False) -> None:
        self.prefix = prefix
        self._timer = time.thread_time if cpu_clock else None
        self._lock = threading.Lock()
        self._profilers: list[cProfile.Profile] = []
        self._sections: dict[str, pstats.Stats] = {}
        threading.setprofile(self._start_in_thread)
        self._add().enable()

    def _add(self) -> cProfile.Profile:
        profiler = cProfile.Profile(self._timer) if self._timer else cProfile.Profile()
        with self._lock:
            self._profilers.append(profiler)
        return profiler

    def _start_in_thread(self, frame: FrameType, event: str, arg: Any) -> None:
        # The first event of a new thread: from here on its own profiler watches it.
        sys.setprofile(None)
        self._add().enable()

    def mark(self, label: str) -> Path:
        """Add what every thread ran since the last mark to the section ``label``;
        start afresh. Call it while the worker is idle: a call still running when the
        profiles are read counts in the next section."""
        with self._lock:
            profilers = list(self._profilers)
        stats: pstats.Stats | None = self._sections.get(label)
        for profiler in profilers:
            # Read and clear from this thread, leaving each profiler enabled in its own
            # (pstats would read a profiler by disabling it, in the thread that reads).
            profiler.snapshot_stats()
            taken = _Taken(profiler.stats)
            profiler.clear()
            if not taken.stats:
                continue
            if stats is None:
                stats = pstats.Stats(taken)  # type: ignore[arg-type]
            else:
                stats.add(taken)  # type: ignore[arg-type]
        path = Path(f"{self.prefix}.{label}.prof")
        if stats is not None:
            self._sections[label] = stats
            stats.dump_stats(path)
        return path


#: Where a thread waits. By default cProfile counts the wall time of a call, so these are
#: set apart; what is left is near the CPU the thread used, plus what it spent waiting
#: for the GIL while another thread held it. ``BENCH_PROFILE_CLOCK=cpu`` counts each
#: thread's own CPU instead: exact, but a system call at every call and return slows a
#: worker about threefold, and under C's fifty sessions calls then outlive their
#: heartbeat timeout (take C with ``--concurrent 10`` then).
WAITS = (
    "<method 'poll' of 'select.epoll' objects>",
    "<method 'get' of '_queue.SimpleQueue' objects>",
    "<method 'acquire' of '_thread.lock' objects>",
    "<built-in method time.sleep>",
)


def package_of(filename: str, name: str) -> str:
    """Which part of the code a profile entry belongs to."""
    if name in WAITS:
        return "waiting"
    if filename == "~":  # a function written in C: by what it belongs to
        for part, package in (
            ("WorkerRef", "temporalio"),  # temporalio's core, in Rust
            ("sqlite3", "sqlite3"),
            ("pydantic_core", "pydantic"),
        ):
            if part in name:
                return package
        return "built-in"
    for package in ("durable_agent", "temporalio", "pydantic_core", "pydantic", "httpx"):
        if f"/{package}/" in filename:
            return "pydantic" if package == "pydantic_core" else package
    if "/wt-" in filename or "/work/main/" in filename:  # this checkout: workflows/, activities/
        if "/bench/" in filename:
            return "bench"
        return "durable_agent"
    if "sqlite3" in filename:
        return "sqlite3"
    if "/site-packages/" in filename:
        return "other packages"
    if "/python3." in filename:
        return "standard library"
    return "other"


def report(path: Path, top: int) -> str:
    stats = pstats.Stats(str(path))
    table: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    shares: dict[str, float] = defaultdict(float)
    for (filename, _, name), (_, _, own, _, _) in table.items():
        shares[package_of(filename, name)] += own
    waiting = shares.pop("waiting", 0.0)
    total = sum(shares.values())
    lines = [f"{path.name}: {total:.2f} s in profiled calls, besides {waiting:.2f} s waiting"]
    lines.append(
        "by package: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(shares.items(), key=lambda kv: -kv[1]))
    )
    lines.append(f"{'own s':>8} {'cum s':>8} {'calls':>9}  function")
    working = {k: v for k, v in table.items() if k[2] not in WAITS}
    ranked = sorted(working.items(), key=lambda kv: -kv[1][2])[:top]
    for (filename, line, name), (_, calls, own, cumulative, _) in ranked:
        where = filename if filename == "~" else f"{'/'.join(Path(filename).parts[-2:])}:{line}"
        lines.append(f"{own:8.3f} {cumulative:8.3f} {calls:9d}  {name} ({where})")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="the top entries of a bench profile")
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    print("\n\n".join(report(p, args.top) for p in args.paths))
