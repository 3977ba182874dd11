"""Messages and the wire: the OpenAI-chat-shaped message array, what a model request
holds, fitting it to a context window, and each wire API's codec.

Pure (no temporalio, no HTTP client). Import each name from the module that defines it,
so that a process loads only what it uses.

Its modules:

- ``messages``: the message model, and the small pieces every side shares (``Contract``).
- ``transcript``: the array's content-hash chain, and a conversation's branches.
- ``context``: the window a request starts from, token counts, fitting a context budget.
- ``outgoing``: ``prepare_request_messages``, the one place the outgoing array is shaped.
- ``options``: provider-neutral request options and the reasoning egress policy.
- ``codecs``: each wire API's request bodies and replies."""
