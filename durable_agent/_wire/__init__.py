"""Messages and the wire: the OpenAI-chat-shaped message array, what a model request
holds, fitting it to a context window, and each wire API's codec.

Pure (no temporalio, no HTTP client). Import each name from the module that defines it,
so that a process loads only what it uses."""
