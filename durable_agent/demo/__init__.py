"""The demo: a sample agent on the embedded Temporal dev server, with a deterministic
built-in model served over HTTP (or a real one when ``OPENAI_API_KEY`` is set)."""
