"""``python -m durable_agent._cli``: the same as the ``durable-agent`` command."""

from ._main import main

main()
