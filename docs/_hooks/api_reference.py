"""Writes the Python API reference from the public face itself: each public module's
``__all__``, in order, each name documented from its docstring. A name made public or
private changes the page with it; nothing is listed by hand."""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Any

#: The public modules, in the order the page shows them, with a line on what each is for.
SECTIONS = (
    ("durable_agent", "Agents, tools, the spec, messages, the client and its errors."),
    ("durable_agent.temporal", "The worker, its plugin, and agents inside your own workflows."),
    ("durable_agent.capabilities", "What a worker lets sessions use."),
    ("durable_agent.testing", "Testing agents, and evals."),
    ("durable_agent.gateway", "The HTTP gateway as an app of your own."),
    ("durable_agent.extending", "A new wire API or a new tool kind."),
)
MARKER = "<!-- the public names -->"
#: Modules the docstring reader cannot find from the checkout: the workflow and activity
#: folders install under the package but sit at the repository's top level. Their few
#: public names are shown by their docstrings as Python reads them.
UNREAD = ("durable_agent._activities", "durable_agent._workflows")


def reference() -> str:
    parts = []
    for module_name, about in SECTIONS:
        module = importlib.import_module(module_name)
        parts.append(f"## `{module_name}`\n\n{about}\n")
        for name in module.__all__:
            value = getattr(module, name)
            defined_in = defining_module(value, name)
            if defined_in.startswith(UNREAD):
                parts.append(f"### `{name}`\n\n{inspect.getdoc(value)}\n")
                continue
            parts.append(
                f"::: {defined_in}.{name}\n"
                "    options:\n"
                "      show_root_full_path: false\n"
                f"      heading: \"{name}\"\n"
            )
    return "\n".join(parts)


def defining_module(value: Any, name: str) -> str:
    """The private module a public name is defined in (the one that holds it under its
    own name and is deepest in the package: a type alias has no ``__module__``)."""
    declared = getattr(value, "__module__", "")
    if declared.startswith("durable_agent"):
        return str(declared)
    holders = [
        module_name
        for module_name, module in list(sys.modules.items())
        if module_name.startswith("durable_agent") and getattr(module, name, None) is value
    ]
    return max(holders, key=lambda m: m.count("."))


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference())
