"""One tree of errors and one enum of failure types: every exception class the package
defines is a ``DurableAgentError`` (catch that to catch any of them), and a failure
type is spelled once, in ``Failure``, never as a string elsewhere."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import durable_agent
from durable_agent._errors import DurableAgentError, Failure

ROOT = Path(__file__).parent.parent.parent
SOURCES = [ROOT / "durable_agent", ROOT / "workflows", ROOT / "activities"]


def test_every_exception_the_package_defines_is_a_durable_agent_error() -> None:
    outside = []
    for module in pkgutil.walk_packages(durable_agent.__path__, "durable_agent."):
        if module.name.endswith("__main__"):
            continue
        loaded = importlib.import_module(module.name)
        for name, value in vars(loaded).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == loaded.__name__
                and not issubclass(value, DurableAgentError)
            ):
                outside.append(f"{module.name}.{name}")
    assert outside == []


def enum_lines(lines: list[str]) -> range:
    """The line numbers of ``class Failure``'s body, where the types are spelled (a face's
    ``__all__`` lists class names, which look alike and are let through too)."""
    if "class Failure(StrEnum):" not in lines:
        return range(0)
    start = lines.index("class Failure(StrEnum):") + 1
    end = next(
        (k for k in range(start, len(lines)) if lines[k] and not lines[k].startswith(" ")),
        len(lines),
    )
    return range(start + 1, end + 1)


def test_a_failure_type_is_spelled_only_in_the_enum() -> None:
    spelled = re.compile("|".join(rf'"{re.escape(f.value)}"' for f in Failure))
    found = []
    for folder in SOURCES:
        for path in folder.rglob("*.py"):
            lines = path.read_text().splitlines()
            enum = enum_lines(lines)
            for number, line in enumerate(lines, 1):
                listed = path.name == "__init__.py" and re.fullmatch(r'\s*"\w+",', line)
                if spelled.search(line) and not listed and number not in enum:
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
