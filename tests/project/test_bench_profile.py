"""The bench's profile holds every thread of a worker, in the sections the bench names:
workflow activations run on a pool of threads, which a profile of one thread misses."""

from __future__ import annotations

import pstats
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.profile import report

ROOT = Path(__file__).parent.parent.parent

# Run apart: a profiler left on in the test process would slow every later test.
SCRIPT = textwrap.dedent(
    """
    import sys
    from concurrent.futures import ThreadPoolExecutor
    from bench.profile import ThreadProfiles

    def in_the_pool(): return sum(range(1000))
    def later_in_the_pool(): return sum(range(10))
    def on_the_main_thread(): return 1

    profiles = ThreadProfiles(sys.argv[1], cpu_clock=sys.argv[2] == "cpu")
    with ThreadPoolExecutor(2) as pool:  # threads started after the profiles
        pool.submit(in_the_pool).result()
        on_the_main_thread()
        profiles.mark("first")
        pool.submit(later_in_the_pool).result()
        profiles.mark("second")
        pool.submit(in_the_pool).result()
        profiles.mark("first")
    """
)


def calls(path: Path) -> dict[str, int]:
    table = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    return {name: entry[1] for (_, _, name), entry in table.items()}


@pytest.mark.parametrize("clock", ["wall", "cpu"])
def test_each_section_holds_what_every_thread_ran_since_the_last_mark(
    tmp_path: Path, clock: str
) -> None:
    prefix = tmp_path / "worker"
    subprocess.run([sys.executable, "-c", SCRIPT, str(prefix), clock], cwd=ROOT, check=True)
    first, second = calls(Path(f"{prefix}.first.prof")), calls(Path(f"{prefix}.second.prof"))
    # a section named twice adds up, and a pool thread's work is in it
    assert first["in_the_pool"] == 2 and first["on_the_main_thread"] == 1
    assert "later_in_the_pool" not in first
    assert second["later_in_the_pool"] == 1 and "in_the_pool" not in second
    printed = report(Path(f"{prefix}.first.prof"), top=50)
    assert "in_the_pool" in printed and "by package:" in printed
