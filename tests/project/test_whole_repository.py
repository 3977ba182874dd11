"""A clone of the repository alone builds, tests and documents itself: no tracked file
names a path beside the checkout (the steering folder, the tool library), and no
Python file climbs from its own place above the repository's root."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[2]
BESIDE = re.compile(r"\.\./(?:shared|\.library)\b|/work/(?:shared|\.library)\b")
CLIMB = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]((?:\.parent)*)")


def tracked() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


def test_no_file_reads_or_points_outside_the_repository() -> None:
    outside = []
    for path in tracked():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        relative = path.relative_to(ROOT)
        if relative.parts[0] != ".ci" and BESIDE.search(text):
            outside.append(f"{relative}: {BESIDE.search(text).group(0)}")  # type: ignore[union-attr]
        if path.suffix == ".py":
            depth = len(relative.parts) - 1  # parents[depth] is the root
            for parents, more in CLIMB.findall(text):
                if int(parents) + more.count(".parent") > depth:
                    outside.append(f"{relative}: climbs above the root ({parents}{more})")
    assert outside == [], outside
