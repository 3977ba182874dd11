"""``python -m durable_agent.cli``: the same as the ``durable-agent`` command."""

from durable_agent.cli.main import main

main()
