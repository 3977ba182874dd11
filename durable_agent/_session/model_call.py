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

How a call is delivered is decided here too (``Delivery``): what went wrong with an
attempt in, what to do next out (send again, wait for capacity, or give up with a reason a
person can act on).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NamedTuple

from durable_agent._contracts.boundary import ModelSetup
from durable_agent._errors import Failure, NotAllowed
from durable_agent._session.toolbox import as_seen_by
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._wire.codecs import Codec, ask_compaction_of, built_by
from durable_agent._wire.codecs.common import with_extra
from durable_agent._wire.context import summary_request
from durable_agent._wire.messages import AssistantMessage, Message, Usage
from durable_agent._wire.options import ModelOptions, with_prompt_cache
from durable_agent._wire.outgoing import (
    PreparedMessages,
    compaction_window,
    fit_request,
    for_endpoint,
    options_for_call,
    prepare_request_messages,
)

from .protocol import ModelFailure

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
    made_at = setup.endpoint.account if isinstance(setup.endpoint, ProviderEndpoint) else None
    messages = for_endpoint(conversation, codec.api, made_at)
    if setup.agent is not None:
        messages = as_seen_by(messages, setup.agent, setup.instructions)
    found, schema = fit_request(messages, setup.inputs, codec.takes, setup.output_schema)
    return Fitted(found, schema)


def shaped(messages: Sequence[Message], setup: ModelSetup) -> PreparedMessages:
    """Step 2: the messages cut to the setup's context budget, as they are sent (the
    codec takes a shaped array as it is). With the provider's compaction the window
    starts at its latest item for this endpoint; with only the provider's, the worker
    applies no budget of its own."""
    target = setup.endpoint if isinstance(setup.endpoint, ProviderEndpoint) else None
    if target is None:
        return prepare_request_messages(messages, setup.context)
    window = compaction_window(messages, target.api, target.account)
    own = target.compaction is None or target.compaction.own_runs
    return prepare_request_messages(window, setup.context if own else None)


def from_endpoint(message: AssistantMessage, setup: ModelSetup) -> AssistantMessage:
    """A reply with its provider's parts (its compaction, its hosted tools' items)
    marked as its endpoint's, so that no other endpoint is ever sent them."""
    mark = {"endpoint": setup.target.account}
    update: dict[str, Any] = {}
    if message.compaction is not None:
        update["compaction"] = message.compaction.model_copy(update=mark)
    if message.provider_items is not None:
        update["provider_items"] = message.provider_items.model_copy(update=mark)
    return message.model_copy(update=update) if update else message


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
    compaction = setup.target.compaction
    if compaction is not None and compaction.provider_runs:
        ask_compaction_of(codec, body, compaction)
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
    options = setup.options.model_copy(update={"hosted_tools": None})  # words only
    body = _codec_body(
        codec, messages, model=setup.model, options=options, reasoning=setup.reasoning
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


# How one model call is delivered: what went wrong with an attempt in, what to do next out.
#
# A model call can come back without a reply for reasons that are not the model's: the
# worker lacks the session's model setup, the endpoint has no capacity yet, the workers'
# transcript store lost what the call pointed at, a worker new to the session says what
# it lacks, or the store lost the reply before its pages were read. Each has its rule
# here: send again (with the setup, or with the whole transcript), wait for capacity, or
# give up with a reason a person can act on. The workflow only carries the answers out.
#
# Nothing here imports temporalio, reads a clock or does I/O, so every rule is tested in
# milliseconds (tests/session/test_delivery.py).

#: Re-sends of one model call's transcript before the session fails: a store that loses
#: it again at once is not shared by the workers (or not kept), and retrying cannot help.
MAX_STORE_REFILLS = 2


# --- what an attempt ran into --------------------------------------------------------


@dataclass(frozen=True)
class Failed:
    """The attempt failed: its failure type (``None``: not one the worker named, such as a
    timeout), its words, when to try again, and the details the worker attached."""

    kind: str | None
    text: str
    retry_after: timedelta | None = None
    details: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Lacks:
    """A worker new to the session answered what it lacks: ``setup``, ``transcript``."""

    lacks: tuple[str, ...]


@dataclass(frozen=True)
class PagesLost:
    """The reply came, but reading its pages of calls failed (``failed``); most often the
    store lost the reply first (a pruned store, a ``memory:`` one whose worker
    restarted). The model was paid for it (``usage``)."""

    failed: Failed
    usage: Usage | None


Trouble = Failed | Lacks | PagesLost


# --- what to do next -----------------------------------------------------------------


@dataclass(frozen=True)
class SendAgain:
    """Make the call again; ``refill_store``: send the whole transcript inline first, for
    the store lost it. The next attempt carries the setup if ``Delivery.setup_inline``."""

    refill_store: bool = False


@dataclass(frozen=True)
class WaitForCapacity:
    """Wait until the endpoint's limiter keeps capacity for the call (at most ``patience``
    seconds), then send again; no attempt of the model was used."""

    endpoint: str
    patience: float


@dataclass(frozen=True)
class GiveUp:
    """The call fails: the Session decides what the turn does about it."""

    failure: ModelFailure


Decision = SendAgain | WaitForCapacity | GiveUp


@dataclass
class Delivery:
    """One model call's attempts. ``setup_known``: the workers are taken to hold the
    session's model setup, so an attempt names it by digest instead of carrying it."""

    setup_known: bool
    refills: int = 0
    """Times the call's transcript (or its reply) was lost by the store and sent again."""
    waited: bool = False
    """The call has waited for capacity: the worker lets it in before calls that did not."""
    unbilled: list[Usage] = field(default_factory=list)
    """Tokens of replies paid for and lost: the turn still counts them."""

    @property
    def setup_inline(self) -> bool:
        """The next attempt carries the model setup (the workers may not hold it)."""
        return not self.setup_known

    def delivered(self) -> None:
        """The reply came: the workers hold the setup now."""
        self.setup_known = True

    def after(self, trouble: Trouble) -> Decision:
        """What to do after an attempt ran into ``trouble``."""
        match trouble:
            case Lacks():
                return self._lacks(trouble.lacks)
            case PagesLost():
                lost = trouble.failed.kind == Failure.TRANSCRIPT_UNKNOWN
                if not lost or self.refills >= MAX_STORE_REFILLS:
                    return give_up(trouble.failed)
                # the reply was billed: the turn counts it, and the model is asked again
                self.refills += 1
                if trouble.usage is not None:
                    self.unbilled.append(trouble.usage)
                return SendAgain()
            case Failed():
                return self._failed(trouble)

    def _failed(self, failed: Failed) -> Decision:
        if failed.kind == Failure.MODEL_SETUP_UNKNOWN and self.setup_known:
            self.setup_known = False  # this worker lacks it: send it
            return SendAgain()
        if failed.kind == Failure.CAPACITY_WAIT:
            self.waited = True
            return WaitForCapacity(str(failed.details[0]), float(failed.details[1]))
        if failed.kind == Failure.TRANSCRIPT_UNKNOWN and self.refills < MAX_STORE_REFILLS:
            self.refills += 1
            return SendAgain(refill_store=True)
        return give_up(failed)

    def _lacks(self, lacks: tuple[str, ...]) -> Decision:
        # what was sent inline and is lacked anyway was not kept where the next worker
        # looks: sending it once more cannot help
        if ("setup" in lacks and not self.setup_known) or (
            "transcript" in lacks and self.refills >= MAX_STORE_REFILLS
        ):
            return GiveUp(
                ModelFailure(
                    Failure.TRANSCRIPT_UNKNOWN,
                    f"a worker lacks the session's {' and '.join(lacks)} after it was "
                    "sent: do all workers share one transcript store?",
                )
            )
        if "setup" in lacks:
            self.setup_known = False
        refill = "transcript" in lacks
        if refill:
            self.refills += 1
        return SendAgain(refill_store=refill)


def give_up(failed: Failed) -> GiveUp:
    """Fail the call with the worker's words; a store that lost the transcript again is
    most often not shared by the workers, and the words say what to check."""
    text = failed.text
    if failed.kind == Failure.TRANSCRIPT_UNKNOWN:
        text += " (the transcript store lost it again: do all workers share one?)"
    return GiveUp(ModelFailure(failed.kind, text, failed.retry_after))
