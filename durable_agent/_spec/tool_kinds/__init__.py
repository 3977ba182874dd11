"""Tool kinds: how a tool is found, recorded and run, one module per kind.

A kind is a ``ToolKind`` with its target models. The built-in kinds are
``BUILT_IN_KINDS``; a worker runs the kinds its ``Registry`` holds
(``docs/how-to/extending.md`` builds one).

Import each name from the module that defines it: a process loads only what it uses."""
