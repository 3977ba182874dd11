"""Writing tools and what runs beside them on a worker: ``@tool``, guardrails, round hooks,
approval predicates and escalation notifiers, and the ``Registry`` that holds them (with
the kinds of tool and the wire APIs a worker has).

Import each name from the module that defines it: a process loads only what it uses."""
