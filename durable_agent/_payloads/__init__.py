"""How payloads travel and rest: temporalio's pydantic converter without the nulls of
durable-agent's own models, encryption at rest (AES-256-GCM, each payload bound to its
session), and large payloads kept in a store with a reference in history.

Import each name from the module that defines it: a process loads only what it uses.

Its modules:

- ``encryption``: the AES-GCM payload codec, and its keys for the transcript store.
- ``storage``: large payloads by reference, the lean converter, and the bucket drivers."""
