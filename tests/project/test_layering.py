"""The layers as Python loads them, each in a fresh interpreter: workflow code never
brings in an HTTP client, the Session's pure core never brings in temporalio, and the
package's face loads nothing until a name is used. (Which package may import which is
import-linter's to check: its contracts are in pyproject.toml.)"""

from __future__ import annotations

import compileall
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path


def loaded_by(module: str) -> list[str]:
    """Every module a fresh interpreter has loaded once ``module`` is imported."""
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names: list[str] = json.loads(run.stdout)
    return names


def test_workflow_code_never_loads_an_http_client() -> None:
    loaded = loaded_by("durable_agent._workflows.agent_workflow")
    assert "temporalio.workflow" in loaded, "the import did happen"
    assert not [m for m in loaded if m.split(".")[0] in ("httpx", "httpcore", "mcp")], loaded


def test_the_session_core_loads_no_temporalio() -> None:
    loaded = loaded_by("durable_agent._session.state_machine")
    assert "durable_agent._session.batch" in loaded, "the import did happen"
    assert not [m for m in loaded if m.split(".")[0] in ("temporalio", "httpx")], loaded


#: The public face: these modules, and every name in their ``__all__``. Every other
#: module has a name with a leading underscore on its path.
PUBLIC_MODULES = (
    "durable_agent",
    "durable_agent.temporal",
    "durable_agent.capabilities",
    "durable_agent.testing",
    "durable_agent.gateway",
    "durable_agent.extending",
)
#: (83: the extending module names the codec protocols its page describes; 88: the
#: capabilities module names memories and workspaces, their sources and bounds; 89: the
#: refusal a starter's wake-up past the owner's bounds raises; up to 95: the owner's
#: registry of remote A2A agents and the settings of the providers' own compaction and
#: hosted tools.)
PUBLIC_NAMES_AT_MOST = 95


def package_modules() -> list[str]:
    """Every module of the package as it installs (the workflow and activity folders
    under it), by its dotted name."""
    root = Path(__file__).parents[2]
    found = []
    for folder, prefix in (
        (root / "durable_agent", "durable_agent"),
        (root / "workflows", "durable_agent._workflows"),
        (root / "activities", "durable_agent._activities"),
    ):
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found.append(".".join([prefix, *parts]))
    return sorted(found)


def public_lists() -> dict[str, list[str]]:
    code = (
        "import importlib, json; print(json.dumps({m: list(importlib.import_module(m).__all__)"
        f" for m in {list(PUBLIC_MODULES)!r}}}))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lists: dict[str, list[str]] = json.loads(run.stdout)
    return lists


def test_the_public_face_is_six_modules_and_at_most_95_names_each_in_one_place() -> None:
    private = [m for m in package_modules() if m not in PUBLIC_MODULES]
    assert private, "the walk found the package"
    assert [m for m in private if not any(p.startswith("_") for p in m.split(".")[1:])] == []
    lists = public_lists()
    every = [name for names in lists.values() for name in names]
    assert 0 < len(every) <= PUBLIC_NAMES_AT_MOST, {m: len(n) for m, n in lists.items()}
    assert sorted(every) == sorted(set(every)), "a name is public in one place only"
    assert not [n for n in every if n.startswith("_")]


def test_the_package_face_imports_nothing_until_a_name_is_used() -> None:
    """``import durable_agent`` loads no other module of the package; its
    public names load on first use, and the table they load from names exactly the
    imports type checkers read."""
    loaded = loaded_by("durable_agent")
    assert [m for m in loaded if m.startswith("durable_agent.")] == []
    import durable_agent

    for name in durable_agent.__all__:
        assert getattr(durable_agent, name) is not None, name
    source = Path(durable_agent.__file__).read_text()
    imported = dict(
        (name, module)
        for module, name in re.findall(
            r"\n    from (durable_agent[\w.]+) import (\w+) as \w+", source
        )
    )
    assert imported == durable_agent._PUBLIC
    assert sorted(durable_agent.__all__) == sorted(imported)
    assert durable_agent.__version__


#: How many of the project's modules a program that only talks to sessions loads.
CLIENT_MODULES_AT_MOST = 60


def test_a_client_loads_no_worker() -> None:
    """The client and what it answers with load no workflow, activity, session or worker
    module, and at most sixty of the project's modules in all."""
    loaded = loaded_by("durable_agent; durable_agent.AgentClient")
    ours = [m for m in loaded if m == "durable_agent" or m.startswith("durable_agent.")]
    assert "durable_agent._client.sessions" in ours, "the import did happen"
    worker_side = ("_workflows", "_activities", "_session", "_providers", "temporal")
    assert [m for m in ours if m.split(".")[1:2] and m.split(".")[1] in worker_side] == []
    assert not [m for m in loaded if m.split(".")[0] in ("httpx", "httpcore", "mcp")]
    assert len(ours) <= CLIENT_MODULES_AT_MOST, (len(ours), ours)


def test_an_install_with_only_bytecode_finds_every_public_name(tmp_path: Path) -> None:
    """The package as an installer lays it out (the workflow and activity folders
    under it), compiled, with every source file removed: each public name loads."""
    root = Path(__file__).parents[2]
    package = tmp_path / "durable_agent"
    shutil.copytree(root / "durable_agent", package, ignore=shutil.ignore_patterns("__pycache__"))
    for folder in ("workflows", "activities"):
        shutil.copytree(
            root / folder, package / f"_{folder}", ignore=shutil.ignore_patterns("__pycache__")
        )
    assert compileall.compile_dir(package, legacy=True, quiet=1)
    for source in package.rglob("*.py"):
        source.unlink()
    code = (
        "import durable_agent, json; "
        "print(json.dumps([durable_agent.__file__, durable_agent.__version__, "
        "[getattr(durable_agent, n).__name__ for n in durable_agent.__all__]]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    where, version, names = json.loads(run.stdout)
    assert where.startswith(str(tmp_path)) and where.endswith(".pyc")
    assert version and len(names) == len(durable_agent_names())


def durable_agent_names() -> list[str]:
    import durable_agent

    return list(durable_agent.__all__)


def test_the_session_takes_events_gives_commands_and_is_read_through_one_view() -> None:
    """Events in (``handle``), commands out (``next_command``), one read-only ``view``;
    besides them only opening and closing a run. No public method of the Session is a
    one-line forward to one of its parts."""
    import ast
    import inspect

    from durable_agent._session import Session, SessionView
    from durable_agent._session.protocol import Event

    public = sorted(name for name in vars(Session) if not name.startswith("_"))
    assert public == ["fail", "for_next_run", "handle", "next_command", "start"]
    session_source = inspect.getsource(Session)
    attributes = set(re.findall(r"^        self\.([a-z]\w*) = ", session_source, re.M))
    assert attributes == {"spec", "messages", "view"}
    assert len(public) + len(attributes) <= 40
    tree = ast.parse(session_source)
    forwards = [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and not node.name.startswith("_")
        and len([s for s in node.body if not isinstance(s, ast.Expr)]) == 1
        and isinstance(node.body[-1], ast.Return)
        and isinstance(node.body[-1].value, ast.Call)
        and re.match(r"self\._(?!state\.)\w+\.\w+$", ast.unparse(node.body[-1].value.func))
    ]
    assert forwards == []
    # every event has its case in ``handle`` (mypy proves it too, with ``assert_never``)
    handled = set(re.findall(r"case (\w+)\(\):", inspect.getsource(Session.handle)))
    assert handled == {kind.__name__ for kind in Event.__args__}
    # the view changes nothing: it has no method that takes an event but ``refusal``
    assert "handle" not in vars(SessionView)


def test_the_session_view_is_small_its_reads_grouped_by_what_they_are_about() -> None:
    """What the workflow and queries read of the Session: at most 20 names, the loop's
    marks, the model call and the approvals each in a read-only group of their own."""
    import inspect

    from durable_agent._session import SessionView
    from durable_agent._session.view import ApprovalsView, LoopView, ModelView

    methods = {name for name in vars(SessionView) if not name.startswith("_")}
    # the classes' text read from their file (``inspect.getsource`` parses the file with
    # ``ast``, which CPython 3.11.7 can fail in a process that hit a RecursionError)
    text = Path(inspect.getfile(SessionView)).read_text()
    found = re.finditer(r"^class (\w+)\b.*?(?=^class |\Z)", text, re.M | re.S)
    classes = {m.group(1): m.group(0) for m in found}
    init = classes["SessionView"].split("    def __init__", 1)[1].split("\n    def ", 1)[0]
    attributes = set(re.findall(r"^        self\.([a-z]\w*) = ", init, re.M))
    assert attributes == {"spec", "messages", "loop", "model", "approvals"}
    assert len(methods | attributes) <= 20, sorted(methods | attributes)
    # a group only reads: past its ``__init__``, nothing is written through ``self``
    for group in (LoopView, ModelView, ApprovalsView):
        reads = classes[group.__name__].split("def ", 2)[2]
        assert not re.search(r"self\.[\w.]+ = ", reads), group.__name__


def test_no_package_holds_more_than_fifteen_percent_of_the_lines() -> None:
    """Each package has one job: none is where everything without a home lands."""
    root = Path(__file__).parents[2]
    packages = [p for p in (root / "durable_agent").iterdir() if (p / "__init__.py").is_file()]
    packages += [root / "workflows", root / "activities"]

    def count(files: Iterable[Path]) -> int:
        return sum(len(f.read_text().splitlines()) for f in files)

    lines = {p.name: count(p.rglob("*.py")) for p in packages}
    top = count((root / "durable_agent").glob("*.py"))
    total = sum(lines.values()) + top
    over = {name: f"{n / total:.1%}" for name, n in lines.items() if n > 0.15 * total}
    assert len(lines) > 10 and over == {}


#: The package's modules at most: each holds a whole job, so a reader finds one file
#: for it rather than a trail of small ones. (150 held the house before the AI SDK and
#: A2A doors; each door is one module, as the AG-UI and OpenAI doors are, and the
#: remote-agent tool kind is one more.)
MODULES_AT_MOST = 156


def test_modules_are_named_for_their_job_and_hold_a_whole_one() -> None:
    """At most 156 modules; none under 40 lines but a package's ``__init__``; none named
    for its own package (``_session/session.py`` says nothing a reader did not know);
    and each folder's ``__init__`` says which folder an import of it reads."""
    root = Path(__file__).parents[2]
    files = [
        path
        for folder in (root / "durable_agent", root / "workflows", root / "activities")
        for path in folder.rglob("*.py")
    ]
    assert len(package_modules()) == len(files) <= MODULES_AT_MOST, len(files)
    short = {
        str(path.relative_to(root)): n
        for path in files
        if path.name != "__init__.py" and (n := len(path.read_text().splitlines())) < 40
    }
    assert short == {}
    def repeats(path: Path) -> bool:
        folder = path.parent.name.lstrip("_")
        return path.stem.lstrip("_") in (folder, folder.removesuffix("s"))

    folder_names = {str(path.relative_to(root)) for path in files if repeats(path)}
    assert folder_names == set()
    for folder, installed in (("workflows", "_workflows"), ("activities", "_activities")):
        said = (root / folder / "__init__.py").read_text()
        assert f"durable_agent.{installed}" in said and f"{folder}/" in said, folder
