"""The model activity: one provider call per turn, streamed, with heartbeats.

Failures are reported by kind. A provider failure a later attempt may not repeat
(429, 5xx, transport, a broken stream) is a non-retryable ``ModelAttemptFailed``
that the workflow counts against the model's ``max_attempts`` and retries after a
durable timer (honouring Retry-After); a permanent one (other 4xx) or a
configuration error ends the call at once. Anything else (a lost worker, a store
that is away) is Temporal's to retry, without using up an attempt.

What a call's lost attempts were billed for is counted too: each attempt notes its
reply's usage in the workers' store first, and a later attempt adds it
(``voided_usage``).
"""

from __future__ import annotations

import os
import secrets
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Literal, NamedTuple

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agent._contracts.boundary import (
    DIGEST_BYTES,
    LoadTranscriptInput,
    ModelCallInput,
    ModelReturn,
    ModelSetup,
    ReplyCallsInput,
    StoredMessageRef,
    StoreTranscriptInput,
    SummaryCallInput,
    TranscriptPage,
    TranscriptRef,
    WorkerLacks,
    arguments_checked,
    digested,
    first_calls,
)
from durable_agent._errors import Failure, NotAllowed, NotRegistered
from durable_agent._observability.tracing import model_call_span, record_failure, record_reply
from durable_agent._providers import (
    ProviderClient,
    ProviderConfigurationError,
    ProviderError,
    ResponseFacts,
    shared_client,
)
from durable_agent._session.model_call import (
    NOT_BUILT,
    extra_keys,
    fitted,
    from_endpoint,
    request_body,
    shaped,
    summary_request_body,
)
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.hooks import HookContext, HookFailed, rewrite_reply, rewrite_request
from durable_agent._tools.registry import Registry
from durable_agent._wire.codecs import (
    Codec,
    built_by,
    continued_request_of,
    hosted_by,
    joined_turn,
)
from durable_agent._wire.context import tokens_left
from durable_agent._wire.messages import AssistantMessage, Message, ToolCall, Usage
from durable_agent._wire.outgoing import PreparedMessages
from durable_agent._wire.transcript import (
    canonical_json,
    content_hash,
    hash_version,
    payload_bytes,
    root_of,
)
from durable_agent.capabilities import Capabilities

from .files import FileFetcher, ProviderParts
from .limits import CapacityGate, Lease, LimitedCall
from .live_deltas import LiveDeltas
from .message_log import MessageFeed, MessageSink
from .running import count_tokens, heartbeating, heartbeats
from .transcript_store import TranscriptStore

log = structlog.get_logger("durable_agent.model")

#: Requests that continue one turn the provider paused (Anthropic's ``pause_turn``, in a
#: long run of its server tools); past them the turn ends with what it has, and its
#: message's ``finish_reason`` stays ``pause_turn`` (the session's status shows it).
MAX_CONTINUATIONS = 5

#: The secret every worker of a fleet derives prompt cache keys with (optional).
CACHE_KEY_SECRET_ENV = "DURABLE_AGENT_CACHE_KEY_SECRET"


def _run_chain(call: ModelCallInput) -> str:
    """Whose memory a call's files are: the session's run chain, which a later session
    reusing the workflow id does not share (a workflow of an earlier release names no
    chain: its run alone)."""
    info = activity.info()
    return f"{info.workflow_id}/{call.run_chain or info.workflow_run_id}"


def cache_key_secret(endpoint: ProviderEndpoint, own: bytes) -> bytes:
    """What prompt cache keys are derived with: the fleet's own secret
    (``$DURABLE_AGENT_CACHE_KEY_SECRET``), else the endpoint's API key (every worker that
    calls it holds it), else ``own``, a secret of this worker's alone."""
    shared = os.environ.get(CACHE_KEY_SECRET_ENV)
    if shared:
        return shared.encode()
    api_key = os.environ.get(endpoint.api_key_env) if endpoint.api_key_env else None
    return b"api-key\0" + api_key.encode() if api_key else own


@contextmanager
def _not_built() -> Iterator[None]:
    """A request its codec refuses to build ends the call as a configuration error."""
    try:
        yield
    except NOT_BUILT as error:
        raise ApplicationError(
            str(error), type=Failure.CONFIGURATION_ERROR, non_retryable=True
        ) from None


def transcript_unknown(what: str) -> ApplicationError:
    """The error the workflow answers by sending the whole array (once)."""
    return ApplicationError(
        f"this worker's transcript store has {what}",
        type=Failure.TRANSCRIPT_UNKNOWN,
        non_retryable=True,
    )


class Outgoing:
    """What of a request's parts leaves the worker: the files of a wire that takes none
    by URL fetched and sent inline (those the owner allows, in what the context budget
    leaves), and what the model server would fetch or look up itself kept only where
    the owner allows it. (I/O: between the request builder's steps 2 and 3.)"""

    def __init__(self, capabilities: Capabilities) -> None:
        self._files = FileFetcher(capabilities.file_fetchable, capabilities.file_limits)
        self._provider_parts = ProviderParts(capabilities)

    async def sendable(
        self,
        prepared: PreparedMessages,
        setup: ModelSetup,
        codec: Codec,
        named: ProviderEndpoint | str,
        run_chain: str,
        left_out: list[str] | None = None,
    ) -> PreparedMessages:
        """``prepared`` as it may leave, for ``setup`` (its endpoint resolved, which the
        spec names as ``named``); ``run_chain``: whose memory the fetched files are;
        ``left_out``: where to put the words of each marker that stands for a part left
        out, for the session's status."""
        if not codec.takes_file_urls:
            rules = setup.context
            prepared = await self._files.inline(
                prepared,
                run_chain,
                tokens_left=tokens_left(prepared, rules),
                chars_per_token=rules.chars_per_token if rules is not None else 4.0,
                left_out=left_out,
            )
        return await self._provider_parts.guarded(prepared, named, setup.target, left_out)


def summed(markers: list[str]) -> list[str]:
    """Each marker's words once, counted where more than one part had them: what the
    session's status says of files a request left out (a few lines however many parts)."""
    counts = Counter(markers)
    return [f"{n} x {words}" if n > 1 else words for words, n in counts.items()]


class _Reply(NamedTuple):
    message: AssistantMessage
    encoded: str
    per_page: int | None
    left_out: int
    files_left_out: list[str]


class ModelActivities:
    def __init__(
        self,
        client: ProviderClient | None = None,
        transcripts: TranscriptStore | None = None,
        cache_size: int = 256,
        capabilities: Capabilities | None = None,
        message_log: MessageSink | None = None,
        registry: Registry | None = None,
    ) -> None:
        self._client = client
        self._registry = registry if registry is not None else Registry()
        self._feed = MessageFeed(message_log) if message_log is not None else None
        self._capabilities = capabilities or Capabilities()
        self._gate = CapacityGate(self._capabilities)
        self._outgoing = Outgoing(self._capabilities)
        self.transcripts = transcripts or TranscriptStore()
        self._setups: OrderedDict[str, ModelSetup] = OrderedDict()
        self._cache_size = cache_size
        self._own_secret = secrets.token_bytes(32)

    async def _setup(self, call: ModelCallInput) -> tuple[ModelSetup, LimitedCall]:
        """The session's model setup (sent inline, cached here, or in the shared store),
        its endpoint resolved; and what its calls ask the endpoint's limit for capacity as."""
        digest = call.setup_digest
        setup = call.setup or self._setups.get(digest)
        if setup is None:
            stored = await self.transcripts.load_setup(digest)
            if stored is None:
                raise ApplicationError(
                    f"this worker does not hold model setup {digest}",
                    type=Failure.MODEL_SETUP_UNKNOWN,
                    non_retryable=True,
                )
            setup = ModelSetup.model_validate_json(stored)
        elif call.setup is not None:
            await self.transcripts.put_setup(digest, call.setup.model_dump_json())
        self._setups[digest] = setup
        self._setups.move_to_end(digest)
        while len(self._setups) > self._cache_size:
            self._setups.popitem(last=False)
        try:  # asked at every call: a setup can come from an input admission never saw
            endpoint = await self._capabilities.endpoint(setup.endpoint)
        except (NotRegistered, NotAllowed) as error:
            raise ApplicationError(
                str(error), type=Failure.CONFIGURATION_ERROR, non_retryable=True
            ) from None
        return setup.model_copy(update={"endpoint": endpoint}), LimitedCall(setup.endpoint, call)

    async def _resolve(self, item: Message | StoredMessageRef) -> Message:
        if not isinstance(item, StoredMessageRef):
            return item
        found = await self.transcripts.load_message(item.stored)
        if found is None:
            raise transcript_unknown(f"no message {item.stored}")
        return found

    async def _extend(
        self, ref: TranscriptRef | None, new: Sequence[Message], head: str, *, check: bool
    ) -> tuple[str, tuple[Message, ...]]:
        """The referenced prefix from the store with ``new`` after it, stored for the next
        call; with ``check``, it must hash to the workflow's ``head``."""
        base = ref.hash if ref else root_of(hash_version(head))  # the head names its chain
        prefix = await self.transcripts.load(base)
        if prefix is None:
            raise transcript_unknown(f"no prefix {base} ({ref.count if ref else 0} messages)")
        ours, messages = await self.transcripts.extend(base, prefix, new)
        if check and ours != head:
            raise transcript_unknown(
                f"a hash mismatch: the workflow has {head}, this worker {ours}"
            )
        if self._feed is not None:  # the array as the workflow holds it: to the log
            await self._feed.offer(messages)
        return ours, messages

    async def _conversation(self, call: ModelCallInput) -> tuple[str, tuple[Message, ...]]:
        """The whole array: the referenced prefix, then the new messages (a fresh start
        is trusted as sent: it re-seeds the store whatever it hashed to before)."""
        new = [await self._resolve(item) for item in call.messages]
        return await self._extend(call.transcript, new, call.head, check=bool(call.transcript))

    @activity.defn(name="store_transcript")
    @heartbeats
    async def store_transcript(self, piece: StoreTranscriptInput) -> None:
        """Put a piece of a transcript in the store (after a store lost it, when the whole
        no longer fits one payload)."""
        new = [await self._resolve(item) for item in piece.messages]
        await self._extend(piece.transcript, new, piece.head, check=True)

    @activity.defn(name="load_transcript")
    @heartbeats
    async def load_transcript(self, page: LoadTranscriptInput) -> list[Message] | TranscriptPage:
        """A page of a stored transcript, at most ``max_bytes`` as a payload carries it
        (at least one message); with each message's digest and size when asked."""
        messages = await self.transcripts.load(page.transcript.hash)
        if messages is None or len(messages) != page.transcript.count:
            raise transcript_unknown(f"no transcript {page.transcript.hash}")
        taken: list[Message] = []
        sizes: list[int] = []
        total, cut = 0, None
        most_calls = page.calls_per_page if page.digested else None  # a cut needs its count
        for whole in messages[page.start :][: page.max_messages]:
            message, cut = first_calls(whole, most_calls)
            size = payload_bytes(whole)
            total += (payload_bytes(message) if cut else size) + (
                DIGEST_BYTES if page.digested else 0
            )
            if taken and total > page.max_bytes:
                cut = None
                break
            taken.append(message)
            sizes.append(size)
            if cut is not None:  # the page ends here; the workflow reads the rest of it
                await self.transcripts.put_message(whole)
                break
        if not page.digested:
            return taken
        # a cut message's digest and size are the whole one's
        wholes = messages[page.start : page.start + len(taken)]
        digests = [content_hash(message) for message in wholes]
        return TranscriptPage(messages=taken, digests=digests, sizes=sizes, calls=cut)

    @activity.defn(name="reply_calls")
    @heartbeats
    async def reply_calls(self, page: ReplyCallsInput) -> list[ToolCall]:
        """Tool calls of a message the store keeps whole (a reply or a page read back was
        cut to its first ones): a page of them per workflow task, however many it has."""
        message = await self.transcripts.load_message(page.key)
        if not isinstance(message, AssistantMessage) or not message.tool_calls:
            raise transcript_unknown(f"no message {page.key} with tool calls")
        return message.tool_calls[page.start : page.stop]

    @activity.defn(name="call_model")
    async def call_model(
        self, call: ModelCallInput
    ) -> AssistantMessage | ModelReturn | WorkerLacks:
        """The model's reply (with its digest and size when the call asks: the workflow
        then joins it to the array without encoding it, whatever its size); or, from a
        worker that has not seen the session, what the workflow must send again."""
        try:
            reply = await self._reply(call)
        except ApplicationError as error:
            lacks = await self._lacks(call, error)
            if not lacks:
                raise
            # a session new to this worker (a deploy, a crash): normal, and no failure
            _log_for(call).info("session new to this worker; its workflow sends", lacks=lacks)
            return WorkerLacks(lacks=lacks)
        message, encoded = reply.message, reply.encoded
        if not call.digested:
            return message
        digest, size = digested(message, encoded)
        left_out = (reply.left_out or None) if call.count_left_out else None
        files = summed(reply.files_left_out) or None
        first, calls = first_calls(message, reply.per_page)
        if calls is None:
            return ModelReturn(
                message=message, digest=digest, size=size, left_out=left_out, files_left_out=files
            )
        # kept whole, where ``reply_calls`` reads the rest; checked here, not in the workflow
        await self.transcripts.put_message(message, encoded)
        checked = arguments_checked(message)
        return ModelReturn(
            message=first,
            digest=digest,
            size=size,
            calls=calls,
            arguments_checked=checked,
            left_out=left_out,
            files_left_out=files,
        )

    async def _lacks(
        self, call: ModelCallInput, error: ApplicationError
    ) -> list[Literal["setup", "transcript"]]:
        """What this worker lacks that the call referred to, when the workflow asks to be
        told (``asks_again``) rather than failed: its model setup, its transcript (a
        worker missing the setup is new to the session: it likely lacks both)."""
        if not call.asks_again:
            return []
        lacks: list[Literal["setup", "transcript"]] = []
        if error.type == Failure.MODEL_SETUP_UNKNOWN:
            lacks.append("setup")
            ref = call.transcript
            if ref is not None and await self.transcripts.load(ref.hash) is None:
                lacks.append("transcript")
        elif error.type == Failure.TRANSCRIPT_UNKNOWN:
            lacks.append("transcript")
        return lacks

    async def _reply(self, call: ModelCallInput) -> _Reply:
        """The reply, its canonical JSON (encoded once: the store's link, the digest),
        the most calls it may bring at once (``ModelSetup.calls_per_page``) and how many
        messages the request left out to fit the context budget."""
        streamed = 0
        live = LiveDeltas(call.turn)

        def on_text(text: str) -> None:
            nonlocal streamed
            streamed += len(text)
            live.text(text)

        # beats from a timer: through the wait for the first byte, reasoning and
        # tool-argument chunks alike (a thinking model is not a dead worker)
        async with heartbeating(lambda: streamed):
            try:
                return await self._call_model(call, on_text, live)
            finally:
                await live.close()

    async def _call_model(
        self, call: ModelCallInput, on_text: Callable[[str], None], live: LiveDeltas
    ) -> _Reply:
        setup, limited = await self._setup(call)
        if setup.agent is not None:
            structlog.contextvars.bind_contextvars(agent=setup.agent)
        if setup.live and setup.stream:
            await live.open()
        head, conversation = await self._conversation(call)
        bound = _log_for(call)
        codec = self._codec(setup)
        setup = self._check_options(setup, limited, codec)
        # the request is built by the pure steps of ``model_call``; here only the
        # I/O between them: hooks, files fetched, provider parts guarded
        messages, schema = fitted(conversation, setup, codec)
        hooks = setup.hooks
        session_id = activity.info().workflow_id or ""
        context = HookContext(session_id=session_id, turn=call.turn, agent=setup.agent)
        if hooks is not None and hooks.request:
            messages = await self._hooked(rewrite_request, hooks.request, messages, context)
        prepared = shaped(messages, setup)
        if prepared.left_out:
            bound.info("context trimmed", left_out=prepared.left_out, sent=len(prepared))
        files_left_out: list[str] = []  # the markers' words, for the session's status
        prepared = await self._outgoing.sendable(
            prepared, setup, codec, limited.endpoint, _run_chain(call), files_left_out
        )
        with _not_built():
            body = request_body(
                codec,
                prepared,
                setup,
                conversation=conversation,
                schema=schema,
                session_id=session_id,
                cache_secret=cache_key_secret(setup.target, self._own_secret),
            )
        message = await self._complete(
            setup, codec, body, prepared, bound, on_text, live.reasoning, limited
        )
        continued = 0
        while (again := continued_request_of(codec, body, message)) is not None:
            if continued == MAX_CONTINUATIONS:
                bound.warning("the provider paused the turn again; it ends here", asked=continued)
                break
            # the same request with the turn so far: the model goes on where it paused,
            # and its text streams on; the workflow gets the whole turn as one reply
            more = await self._complete(
                setup, codec, again, prepared, bound, on_text, live.reasoning, limited
            )
            message, continued = joined_turn(message, more), continued + 1
        message = from_endpoint(await with_voided_usage(self.transcripts, message), setup)
        if hooks is not None and hooks.reply:  # the reply as recorded: replay reads it
            message = await self._hooked(rewrite_reply, hooks.reply, message, context)
        if setup.agent is not None:
            message = message.model_copy(update={"agent_name": setup.agent})
        if call.message_id is not None and message.id is None:
            message = message.model_copy(update={"id": call.message_id})
        bound.info(
            "model turn", tool_calls=len(message.tool_calls or ()), chars=len(message.content)
        )
        # the reply enters history once, in this result; the store keeps it for the next
        # call, if it can: the model is not asked again because the store is away (the
        # next call then finds the prefix missing and the workflow sends it whole)
        encoded = canonical_json(message)
        try:
            await self.transcripts.extend(head, conversation, [message], [encoded])
        except Exception as error:
            bound.warning("transcript store unavailable; reply not kept", error=str(error))
        return _Reply(message, encoded, setup.calls_per_page, prepared.left_out, files_left_out)

    async def _hooked(
        self, rewrite: Any, names: list[str], value: Any, context: HookContext
    ) -> Any:
        try:
            return await rewrite(self._registry, names, value, context)
        except HookFailed as error:  # ends the turn with its words; never retried
            raise ApplicationError(
                str(error), type=Failure.HOOK_FAILED, non_retryable=True
            ) from None

    @activity.defn(name="summarise_context")
    async def summarise_context(self, call: SummaryCallInput) -> AssistantMessage:
        """A summary of the conversation's first ``until`` messages (compaction): the
        setup's model answers the prompt over them as plain lines."""
        async with heartbeating(lambda: 0):
            setup, limited = await self._setup(call)
            codec = self._codec(setup)
            self._check_options(setup, limited, codec)
            _, conversation = await self._conversation(call)
            with _not_built():
                asked, body = summary_request_body(
                    codec, conversation, setup, until=call.until, prompt=call.prompt
                )
            bound = _log_for(call)
            message = await self._complete(
                setup, codec, body, asked, bound, lambda text: None, None, limited
            )
            if not message.content.strip():
                raise ApplicationError(
                    "the summary came back empty",
                    type=Failure.MODEL_ATTEMPT_FAILED,
                    non_retryable=True,
                )
            bound.info("context summarised", until=call.until, chars=len(message.content))
            return message

    async def _complete(
        self,
        setup: ModelSetup,
        codec: Codec,
        body: dict[str, Any],
        sent: Sequence[Message],
        bound: Any,
        on_text: Callable[[str], None],
        on_reasoning: Callable[[str], None] | None = None,
        limited: LimitedCall | None = None,
    ) -> AssistantMessage:
        """One provider call, with capacity on the endpoint's shared limit when it has one;
        its failures as the workflow tells them apart. ``sent``: the messages ``body``
        carries, as the span records them (in no wire's shape)."""
        client, facts = self._client or shared_client(), ResponseFacts()
        hold = activity.info().start_to_close_timeout or timedelta(minutes=10)
        lease = (
            await self._gate.acquire(limited, setup, codec, body, hold.total_seconds())
            if limited
            else None
        )
        with model_call_span(setup, codec, sent) as span:
            try:
                message = await client.complete(
                    setup.target,
                    body,
                    codec=codec,
                    on_text=on_text,
                    on_reasoning=on_reasoning,
                    facts=facts,
                )
            except ProviderError as error:
                _give_back(lease, error)
                record_failure(span, type(error).__name__, error.message)
                raise self._failure(error, bound) from error
            except BaseException:  # cancelled, or the stream broke: the capacity goes back
                _give_back(lease)
                raise
            _give_back(lease, message.usage)
            record_reply(span, message, facts.response_id)
            count_tokens(setup.model, message.usage, setup.price)
            if message.is_error:
                record_failure(span, Failure.MODEL_ATTEMPT_FAILED, message.error or "")
        if message.is_error and message.refusal is None:
            bound.warning("model turn failed", error=message.error)
            raise ApplicationError(
                f"model turn failed: {message.error}",
                type=Failure.MODEL_ATTEMPT_FAILED,
                non_retryable=True,
            )
        return message.model_copy(update={"timestamp": int(time.time() * 1000)})

    def _codec(self, setup: ModelSetup) -> Codec:
        """The codec of the setup's wire API, as this worker's registry has it."""
        try:
            return self._registry.codec(setup.target.api)
        except ValueError as error:
            raise ApplicationError(
                str(error), type=Failure.CONFIGURATION_ERROR, non_retryable=True
            ) from None

    def _check_options(
        self, setup: ModelSetup, limited: LimitedCall, codec: Codec
    ) -> ModelSetup:
        """Refuse, before anything is fetched or sent, a call whose ``options.extra``
        names a key the owner does not allow for its endpoint, or one the request is
        built from, or that asks for a hosted tool the owner does not allow there
        (asked at every call: a setup can come from an input admission never saw).
        The setup back with its hosted tools as they are sent (the owner's settings)."""
        extra = extra_keys(setup)
        problems = self._capabilities.option_problems(limited.endpoint, extra, built_by(codec))
        options, wrong = self._capabilities.hosted_tools_for(
            limited.endpoint, setup.options, hosted_by(codec)
        )
        problems += wrong
        if problems:
            raise ApplicationError(
                f"model.options.{problems[0]}", type=Failure.CONFIGURATION_ERROR, non_retryable=True
            )
        return setup.model_copy(update={"options": options})

    @staticmethod
    def _failure(error: ProviderError, bound: Any) -> ApplicationError:
        """A provider's failure as the workflow tells them apart."""
        if isinstance(error, ProviderConfigurationError):
            bound.error("model call cannot be made as configured", error=error.message)
            return ApplicationError(
                error.message, type=Failure.CONFIGURATION_ERROR, non_retryable=True
            )
        bound.warning("provider call failed", error=error.message, retryable=error.retryable)
        return ApplicationError(
            error.message,
            type=Failure.MODEL_ATTEMPT_FAILED if error.retryable else Failure.PROVIDER_ERROR,
            non_retryable=True,  # the workflow counts and retries the model's failures
            next_retry_delay=(
                timedelta(seconds=error.retry_after) if error.retry_after is not None else None
            ),
        )


def _give_back(lease: Lease | None, outcome: Usage | ProviderError | None = None) -> None:
    if lease is None:
        return
    if isinstance(outcome, ProviderError):
        limited = outcome.status_code == 429
        lease.give_back(rate_limited=limited, retry_after=outcome.retry_after)
    else:
        lease.give_back(outcome)


def _log_for(call: ModelCallInput) -> Any:
    info = activity.info()
    return log.bind(session_id=info.workflow_id, turn=call.turn, attempt=info.attempt)


# What a model call's lost attempts were billed for.
#
# A worker that dies after the provider answered, but before its activity reported, has
# cost tokens no result carries: Temporal retries the call elsewhere and the provider
# bills again. Each attempt notes its reply's usage in the workers' store first; a later
# attempt of the same call adds what earlier ones noted to its reply
# (``voided_usage``), so budgets and the per-model spend count every billed attempt. A
# store that keeps nothing across workers (``memory:``) cannot tell, and says nothing.

billing_log = structlog.get_logger("durable_agent.billing")


async def with_voided_usage(store: TranscriptStore, reply: AssistantMessage) -> AssistantMessage:
    """``reply`` with the usage its call's earlier, lost attempts noted; this attempt's
    own usage noted for a later one."""
    info = activity.info()
    call = f"billed:{info.workflow_run_id}:{info.activity_id}"
    try:
        if reply.usage is not None:
            await store.put_note(f"{call}:{info.attempt}", reply.usage.model_dump_json())
        voided = [await store.load_note(f"{call}:{k}") for k in range(1, info.attempt)]
    except Exception as error:  # billing is told, never the reason a call fails
        billing_log.warning("billing notes unavailable", error=str(error))
        return reply
    found = [Usage.model_validate_json(note) for note in voided if note is not None]
    if not found:
        return reply
    total = sum(found[1:], found[0])
    return reply.model_copy(update={"voided_usage": total})
