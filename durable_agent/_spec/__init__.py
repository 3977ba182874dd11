"""The agent spec: what a session asks for (model, tools, approval and tool policies,
endpoints and their limits), read strictly, and the kinds of tool it may name.

Pure (no temporalio, no HTTP client). Import each name from the module that defines it,
so that a process loads only what it uses."""
