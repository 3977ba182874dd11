"""Every side effect of a session: model calls over HTTP and tool execution."""
