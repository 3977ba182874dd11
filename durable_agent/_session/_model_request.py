"""The request a model call sends, built in one place from data: the conversation, the
session's model setup and the codec of its wire in, the body out.

The worker's ``call_model`` activity and the test kit's in-process run both build every
request here, so what a test sees is byte for byte what a worker sends. The steps, in
this order:

1. ``fitted``: the conversation as the calling agent sees it (in a swarm), with every
   part the model or its wire does not take left out behind a marker, and a schema
   asked for in words where the endpoint takes none;
2. ``shaped``: cut to the context budget, each message as it is sent;
3. ``request_body``: the options for this call with the session's prompt-cache key, the
   codec's body with the spec's ``extra`` added after it, and a JSON object asked for
   where the endpoint says so.

What needs I/O happens between the steps, in the caller: request hooks between 1 and 2;
files fetched and provider parts guarded between 2 and 3. ``built_request`` runs the
three steps with nothing between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from durable_agent._contracts._contracts import ModelSetup
from durable_agent._errors import NotAllowed
from durable_agent._session._swarm_view import as_seen_by
from durable_agent._wire._context import summary_request
from durable_agent._wire._messages import Message
from durable_agent._wire._model_inputs import fit_request
from durable_agent._wire._model_options import ModelOptions, with_prompt_cache
from durable_agent._wire._request_messages import (
    PreparedMessages,
    options_for_call,
    prepare_request_messages,
)
from durable_agent._wire.codecs import Codec, built_by
from durable_agent._wire.codecs._common import with_extra

NOT_BUILT = (ValueError, NotAllowed)
"""What a codec raises for a request it cannot build as configured (the call ends with
a configuration error, never retried)."""


class Fitted(NamedTuple):
    """The messages a request carries before they are shaped, and the schema its
    structured-output field takes (``None``: none, or asked for in words)."""

    messages: list[Message]
    schema: dict[str, Any] | None


class BuiltRequest(NamedTuple):
    body: dict[str, Any]
    left_out: int
    """How many messages the context budget left out."""


def fitted(conversation: Sequence[Message], setup: ModelSetup, codec: Codec) -> Fitted:
    """Step 1: the conversation as the setup's agent sees it, fitted to what the model
    and the codec's wire take."""
    messages = list(conversation)
    if setup.agent is not None:
        messages = as_seen_by(conversation, setup.agent, setup.instructions)
    found, schema = fit_request(messages, setup.inputs, codec.takes, setup.output_schema)
    return Fitted(found, schema)


def shaped(messages: Sequence[Message], setup: ModelSetup) -> PreparedMessages:
    """Step 2: the messages cut to the setup's context budget, as they are sent (the
    codec takes a shaped array as it is)."""
    return prepare_request_messages(messages, setup.context)


def extra_keys(setup: ModelSetup) -> set[str]:
    """The ``model.options.extra`` keys a setup asks the endpoint's owner to allow (the
    prompt-cache key is the worker's own, never the spec's)."""
    return set(setup.options.extra) - {"prompt_cache_key"}


def request_body(
    codec: Codec,
    prepared: PreparedMessages,
    setup: ModelSetup,
    *,
    conversation: Sequence[Message],
    schema: dict[str, Any] | None,
    session_id: str,
    cache_secret: bytes,
) -> dict[str, Any]:
    """Step 3: the body of a call with ``prepared`` messages (the setup's endpoint
    resolved). Raises one of ``NOT_BUILT`` for a request the codec refuses."""
    options = with_prompt_cache(
        options_for_call(setup.options, conversation),
        codec.caches_prompts,
        setup.target.base_url,
        session_id,
        setup.agent,
        cache_secret,
    )
    body = _codec_body(
        codec,
        prepared,
        model=setup.model,
        tools=setup.tools,
        options=options,
        output_schema=schema,
        reasoning=setup.reasoning,
        stream=setup.stream,
    )
    inputs = setup.inputs
    if setup.output_schema and inputs is not None and inputs.structured_output == "json_object":
        codec.ask_json_object(body, setup.output_schema)
    return body


def built_request(
    conversation: Sequence[Message],
    setup: ModelSetup,
    codec: Codec,
    *,
    session_id: str,
    cache_secret: bytes,
) -> BuiltRequest:
    """The three steps with nothing between them (no hooks, files as they stand)."""
    messages, schema = fitted(conversation, setup, codec)
    prepared = shaped(messages, setup)
    body = request_body(
        codec,
        prepared,
        setup,
        conversation=conversation,
        schema=schema,
        session_id=session_id,
        cache_secret=cache_secret,
    )
    return BuiltRequest(body, prepared.left_out)


class SummaryRequest(NamedTuple):
    messages: list[Message]
    """What the summarising model is asked: the prompt, and the conversation as lines."""
    body: dict[str, Any]


def summary_request_body(
    codec: Codec, conversation: Sequence[Message], setup: ModelSetup, *, until: int, prompt: str
) -> SummaryRequest:
    """The request that summarises the conversation's first ``until`` messages
    (compaction): the prompt over them as plain lines, on the setup's model."""
    messages = summary_request(conversation, until, prompt)
    body = _codec_body(
        codec, messages, model=setup.model, options=setup.options, reasoning=setup.reasoning
    )
    return SummaryRequest(messages, body)


def _codec_body(
    codec: Codec, messages: Sequence[Message], *, options: ModelOptions, **fields: Any
) -> dict[str, Any]:
    """The codec's body, built without the spec's ``extra``, which is added after:
    never in place of a key the codec wrote, whatever the codec does with options."""
    extra = dict(options.extra)
    body = codec.build_request(messages, options=options.model_copy(update={"extra": {}}), **fields)
    return with_extra(body, extra, built_by(codec))
