"""``durable-agent serve``: the HTTP gateway (REST, SSE and AG-UI), its shared
per-session polls and the web console page."""
