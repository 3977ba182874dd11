"""Writing tools and what runs beside them on a worker: ``@tool``, guardrails, round hooks,
approval predicates and escalation notifiers, and the ``Registry`` that holds them (with
the kinds of tool and the wire APIs a worker has).

Import each name from the module that defines it: a process loads only what it uses.

Its modules:

- ``functions``: ``@tool``: typed Python functions, described to the model and run.
- ``hooks``: hooks over each model call, and guardrails.
- ``registry``: ``Registry``: everything one worker runs or speaks, by name.
- ``mcp_servers``: the MCP kind's worker half (the ``mcp`` SDK).
- ``openapi``: the OpenAPI kind's worker half: documents as tools, one request a call.
- ``a2a_agents``: remote A2A agents as tools (``RemoteAgents``), one message a call."""
