"""Files a message gives by URL are fetched only as the worker's owner allows: an origin
entry with a path allows that path alone (after dot segments and escapes); a request
considers at most so many parts and reads at most so many bytes, counting every attempt
(refused, too large, out of room, served from memory) and every byte read, and asks for
nothing its context budget has no room for; one deadline bounds all of a request's
fetches; a part refused once is not asked for again in its session; what is kept and
refused belongs to one session's run chain (through continue-as-new, never to a later
session under the same id), and a kept file is asked after at its origin at each use;
a log line never shows a URL's query. Each is shown by what reached the origin and what
the request carried, over real HTTP."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from durable_agent._activities.files import FileFetcher
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._cli.render import format_status
from durable_agent._tools.registry import Registry
from durable_agent._wire.context import ContextRules
from durable_agent._wire.messages import (
    FilePart,
    Message,
    TextPart,
    UserMessage,
    file_part_from_url,
    user_message,
)
from durable_agent._wire.outgoing import ModelInputs, PreparedMessages
from durable_agent.capabilities import Capabilities, FileLimits
from durable_agent.testing import ScriptedProvider, assistant_text
from tests.support.agent_harness import running_worker, spec_for, wait_for
from tests.support.file_origin import FileOrigin

PDF = b"%PDF-1.4 " + b"r" * 1000


def prepared(*urls: str, context: ContextRules | None = None) -> PreparedMessages:
    message = user_message("read these", *(file_part_from_url(u) for u in urls))
    return PreparedMessages([message], context, 0)


def parts(messages: list[Message]) -> list[Any]:
    content = messages[0].content
    assert isinstance(content, list)
    return content[1:]


def inline_count(messages: list[Message]) -> int:
    return sum(isinstance(p, FilePart) and bool(p.file.file_data) for p in parts(messages))


@pytest.mark.parametrize(
    "path",
    [
        "/private/secret.txt",
        "/public/../private/secret.txt",
        "/public/%2e%2e/private/secret.txt",
        "/public/%252e%252e/private/secret.txt",
        "/public/..%2fprivate/secret.txt",
        "/public/..\\private/secret.txt",
        "/publicity/secret.txt",
    ],
)
async def test_an_origin_entry_with_a_path_allows_that_path_alone(path: str) -> None:
    with FileOrigin(files={"/private/secret.txt": b"secret", "/publicity/secret.txt": b"x"}) as o:
        allowed = Capabilities(file_origins=[f"{o.url}/public/"])
        fetcher = FileFetcher(allowed.file_fetchable)
        sent = await fetcher.inline(prepared(o.url + path), "s-1")
    assert o.asked == [], "no request reached the origin"
    assert parts(sent) == [TextPart(text="[file omitted: Chat Completions takes no file by URL]")]


async def test_a_file_inside_the_allowed_path_is_fetched_as_checked() -> None:
    with FileOrigin(files={"/public/report.pdf": PDF}) as o:
        allowed = Capabilities(file_origins=[f"{o.url}/public"])
        fetcher = FileFetcher(allowed.file_fetchable)
        sent = await fetcher.inline(prepared(f"{o.url}/public/drafts/../report.pdf"), "s-1")
    assert o.paths() == ["/public/report.pdf"], "the path as checked is the one asked"
    [part] = parts(sent)
    assert isinstance(part, FilePart)
    assert part.file.file_data == "data:application/pdf;base64," + base64.b64encode(PDF).decode()


async def test_a_request_fetches_at_most_its_files_and_bytes_newest_first() -> None:
    urls = [f"/f{k}.pdf" for k in range(20)]
    with FileOrigin(files={u: PDF for u in urls}) as o:
        fetcher = FileFetcher(
            Capabilities(file_origins=[o.url]).file_fetchable,
            FileLimits(max_files=3, max_bytes=10 * len(PDF)),
        )
        sent = await fetcher.inline(prepared(*(o.url + u for u in urls)), "s-1")
        by_bytes = FileFetcher(
            Capabilities(file_origins=[o.url]).file_fetchable,
            FileLimits(max_files=20, max_bytes=2 * len(PDF) + 10),
        )
        o.asked.clear()
        sent_by_bytes = await by_bytes.inline(prepared(*(o.url + u for u in urls)), "s-2")
    got = parts(sent)
    assert inline_count(sent) == 3
    assert [isinstance(p, FilePart) for p in got[-3:]] == [True] * 3, "the newest first"
    assert "file_limits.max_files" in got[0].text
    assert inline_count(sent_by_bytes) == 2
    # past the bytes left, a file is refused by its declared size: its body is never read
    assert "larger than" in parts(sent_by_bytes)[0].text


async def test_a_file_counts_against_the_context_budget() -> None:
    with FileOrigin(files={"/a.pdf": PDF, "/b.pdf": PDF}) as o:
        fetcher = FileFetcher(Capabilities(file_origins=[o.url]).file_fetchable)
        rules = ContextRules(budget_tokens=400, chars_per_token=4.0)
        message = prepared(f"{o.url}/a.pdf", f"{o.url}/b.pdf", context=rules)
        # the text takes 3 tokens; one file of 1,009 bytes counts 253: one fits, not two
        sent = await fetcher.inline(message, "s-1", tokens_left=397.0, chars_per_token=4.0)
    assert inline_count(sent) == 1
    assert "context budget" in parts(sent)[0].text


async def test_a_kept_file_is_one_sessions_and_asked_after_at_each_use() -> None:
    with FileOrigin(files={"/report.pdf": PDF}) as o:
        fetcher = FileFetcher(Capabilities(file_origins=[o.url]).file_fetchable)
        url = f"{o.url}/report.pdf"
        first = await fetcher.inline(prepared(url), "alice-session")
        again = await fetcher.inline(prepared(url), "alice-session")
        o.forbidden = True  # the origin stops serving the file
        other = await fetcher.inline(prepared(url), "bob-session")
        later = await fetcher.inline(prepared(url), "alice-session")
    assert inline_count(first) == inline_count(again) == 1
    tags = [a.if_none_match for a in o.asked]
    assert tags[0] is None and tags[1] is not None, "the second use asked with its ETag"
    assert tags[2] is None, "another session's first use is its own fetch"
    assert inline_count(other) == 0 and "HTTP 403" in parts(other)[0].text
    assert inline_count(later) == 0, "a file the origin refuses is not served from memory"


async def test_one_deadline_bounds_a_whole_fetch() -> None:
    with FileOrigin(files={"/slow.pdf": PDF}, trickle={"/slow.pdf"}) as o:
        fetcher = FileFetcher(
            Capabilities(file_origins=[o.url]).file_fetchable, FileLimits(fetch_seconds=1.0)
        )
        sent = await fetcher.inline(prepared(f"{o.url}/slow.pdf"), "s-1")
    # each byte came well within any per-read timeout; the whole did not come in time
    assert inline_count(sent) == 0
    assert "not fetched within 1.0 s" in parts(sent)[0].text


async def test_a_failed_fetch_logs_no_query_or_user_info(capfd: pytest.CaptureFixture[str]) -> None:
    with FileOrigin() as o:
        fetcher = FileFetcher(Capabilities(file_origins=[o.url]).file_fetchable)
        host = o.url.removeprefix("http://")
        url = f"http://ana:pw-canary@{host}/gone.pdf?access_token=tok-canary"
        await fetcher.inline(prepared(url), "s-1")
    logged = capfd.readouterr()
    lines = logged.out + logged.err
    assert "/gone.pdf" in lines, "the failure is logged"
    assert "tok-canary" not in lines and "pw-canary" not in lines
    assert [a.path for a in o.asked] == ["/gone.pdf?access_token=tok-canary"]


async def test_a_model_that_takes_no_files_fetches_none(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """End to end: a spec whose model takes no files sends a marker, and no request
    reaches the registered origin."""
    with FileOrigin(files={"/report.pdf": PDF}) as o:
        allowed = Capabilities.development(file_origins=[o.url])
        with ScriptedProvider([assistant_text("no file")]) as provider:
            spec = spec_for(provider, [], session={})
            model = spec.model.model_copy(update={"inputs": ModelInputs(files=False)})
            spec = spec.model_copy(update={"model": model})
            async with running_worker(
                temporal_env, task_queue, Registry(), capabilities=allowed
            ) as c:
                agents = AgentClient(c, task_queue=task_queue)
                message = user_message("read", file_part_from_url(f"{o.url}/report.pdf"))
                sid = await agents.start(spec, message)
                await agents.session(sid).wait(timeout=60)
        sent = provider.requests[0].body["messages"][0]["content"]
    assert o.asked == []
    assert "this model takes no files" in sent[1]["text"]


def fetched_by(origin: FileOrigin, limits: FileLimits | None = None) -> FileFetcher:
    return FileFetcher(Capabilities(file_origins=[origin.url]).file_fetchable, limits)


def omitted(messages: list[Message]) -> list[str]:
    return [p.text for p in parts(messages) if isinstance(p, TextPart)]


async def test_failing_parts_each_count_and_are_not_asked_for_again() -> None:
    """60 parts the origin answers 404: each takes one of the request's ``max_files``,
    and the chain's next request asks for none of them again."""
    urls = [f"/gone/{k}.pdf" for k in range(60)]
    with FileOrigin() as o:
        fetcher = fetched_by(o)
        first = await fetcher.inline(prepared(*(o.url + u for u in urls)), "chain-1")
        asked_first = o.paths()
        o.asked.clear()
        again = await fetcher.inline(prepared(*(o.url + u for u in urls)), "chain-1")
        asked_again = o.paths()
        o.asked.clear()
        other = await fetcher.inline(prepared(*(o.url + u for u in urls)), "chain-2")
    assert asked_first == urls[-10:][::-1], "the newest ten, once each"
    assert inline_count(first) == 0 and len(omitted(first)) == 60
    assert all("HTTP 404" in text for text in omitted(first)[-10:])
    assert all("file_limits.max_files" in text for text in omitted(first)[:50])
    assert asked_again == [], "a refused part is not asked for again in its chain"
    assert all("not asked for again" in text for text in omitted(again)[-10:])
    assert len(o.paths()) == 10, "another chain remembers nothing of this one's refusals"
    assert inline_count(other) == 0


async def test_bytes_read_from_a_refused_file_count() -> None:
    """60 parts naming 4 MB files sent without a length, over the 1 MB one file may
    have: each read is given up past 1 MB, and what it read counts."""
    size, one_mb = 4 * 1024 * 1024, 1024 * 1024
    urls = [f"/big/{k}.pdf" for k in range(60)]
    files = {u: b"%PDF-1.4 " + b"x" * (size - 9) for u in urls}
    with FileOrigin(files=files, unsized=set(urls)) as o:
        sent = await fetched_by(o, FileLimits(max_file_bytes=one_mb)).inline(
            prepared(*(o.url + u for u in urls)), "chain-1"
        )
        asked, served = len(o.asked), o.served
        o.asked.clear()
        # the same with 3 MB in all: three reads of a little over 1 MB use it up
        small = FileLimits(max_file_bytes=one_mb, max_bytes=3 * one_mb)
        tight = await fetched_by(o, small).inline(prepared(*(o.url + u for u in urls)), "chain-2")
    assert inline_count(sent) == 0 and asked == 10
    assert served <= asked * size, "no request read more than one file"
    assert all("file_limits.max_file_bytes" in text for text in omitted(sent)[-10:])
    assert len(o.asked) == 3 and inline_count(tight) == 0
    assert "file_limits.max_bytes" in omitted(tight)[-4], "nothing left: no request at all"


async def test_a_part_the_budget_has_no_room_for_is_not_fetched() -> None:
    """60 parts that fit ``max_file_bytes`` but not the context budget: with no room
    left none is asked for; with a little, each request counts, and the chain's next
    request asks for none of them again."""
    urls = [f"/f{k}.pdf" for k in range(60)]
    with FileOrigin(files={u: PDF for u in urls}) as o:
        fetcher = fetched_by(o)
        full = await fetcher.inline(
            prepared(*(o.url + u for u in urls)), "chain-1", tokens_left=0.0
        )
        asked_full = len(o.asked)
        # room for 400 bytes: each 1,009-byte file is refused by its declared length
        some = await fetcher.inline(
            prepared(*(o.url + u for u in urls)), "chain-2", tokens_left=100.0
        )
        asked_some = len(o.asked)
        again = await fetcher.inline(
            prepared(*(o.url + u for u in urls)), "chain-2", tokens_left=100.0
        )
    assert asked_full == 0 and inline_count(full) == 0
    assert all("context budget" in text for text in omitted(full)[-10:])
    assert asked_some == 10 and inline_count(some) == 0
    assert all("context budget (400 bytes left)" in text for text in omitted(some)[-10:])
    assert len(o.asked) == 10, "the next request asked for none again"
    assert inline_count(again) == 0


async def test_one_deadline_bounds_all_of_a_requests_fetches() -> None:
    """Five parts on an origin that sends a byte every 0.2 s: the first uses up the
    request's one deadline, and the others are never asked for."""
    urls = [f"/slow/{k}.pdf" for k in range(5)]
    with FileOrigin(files={u: PDF for u in urls}, trickle=set(urls)) as o:
        fetcher = fetched_by(o, FileLimits(fetch_seconds=1.0))
        sent = await fetcher.inline(prepared(*(o.url + u for u in urls)), "chain-1")
    assert o.paths() == [urls[-1]], "one part attempted, not one deadline per part"
    assert inline_count(sent) == 0
    assert all("not fetched within 1.0 s" in text for text in omitted(sent))


async def test_a_reused_session_id_reads_nothing_the_earlier_session_kept(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """End to end: a session reads a file and ends; a new session under the same id, on
    the same worker, fetches the file afresh rather than asking after the copy the
    earlier one kept."""
    with FileOrigin(files={"/report.pdf": PDF}) as o:
        allowed = Capabilities.development(file_origins=[o.url])
        script = [assistant_text("a report"), assistant_text("a report again")]
        with ScriptedProvider(script) as provider:
            spec = spec_for(provider, [])  # each session ends after its reply
            async with running_worker(
                temporal_env, task_queue, Registry(), capabilities=allowed
            ) as c:
                agents = AgentClient(c, task_queue=task_queue)
                message = user_message("read", file_part_from_url(f"{o.url}/report.pdf"))
                sid = await agents.start(spec, message, session_id="reused-files")
                await agents.session(sid).wait(timeout=60)
                await agents.start(spec, message, session_id=sid, restart=True)
                await agents.session(sid).wait(timeout=60)
        sent = [r.body["messages"][0]["content"][1] for r in provider.requests]
    assert o.paths() == ["/report.pdf", "/report.pdf"]
    assert [a.if_none_match for a in o.asked] == [None, None], "no kept copy asked after"
    assert [part["type"] for part in sent] == ["file", "file"]


async def test_a_kept_file_stays_with_its_session_through_continue_as_new(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """The chain, not the run: after the session continues as new, its next request
    asks after the copy kept before (with its ETag) rather than fetching it again."""
    with FileOrigin(files={"/report.pdf": PDF}) as o:
        allowed = Capabilities.development(file_origins=[o.url])
        script = [assistant_text(f"a report, {k}") for k in range(3)]
        with ScriptedProvider(script) as provider:
            spec = spec_for(provider, [], session={"continue_as_new_after_events": 20})
            async with running_worker(
                temporal_env, task_queue, Registry(), capabilities=allowed
            ) as c:
                agents = AgentClient(c, task_queue=task_queue)
                message = user_message("read", file_part_from_url(f"{o.url}/report.pdf"))
                sid = await agents.start(spec, message)
                session = agents.session(sid)
                await session.wait(timeout=60)
                cursor = await session.send("and again?")
                await session.wait(after=cursor, timeout=60)
                # two turns pass the 20 events: the idle session continues as new, and
                # the third request comes from a later run of its chain
                await wait_for(lambda: _continued(session), timeout=60)
                asked_before = len(o.asked)
                cursor = await session.send("once more?")
                await session.wait(after=cursor, timeout=60)
                await session.end()
        sent = [r.body["messages"][0]["content"][1] for r in provider.requests]
    assert asked_before == 2 and o.paths() == ["/report.pdf"] * 3
    assert o.asked[0].if_none_match is None
    assert o.asked[2].if_none_match is not None, "the continued run asked after its kept copy"
    assert [part["type"] for part in sent] == ["file"] * 3


async def _continued(session: Any) -> bool | None:
    return True if (await session.status()).runs > 1 else None


async def test_the_user_reads_what_the_model_was_told_of_files_left_out(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """The marker the model reads in place of a file it did not get is in the session's
    status too, counted (and in ``durable-agent status``): 12 parts the origin does not
    serve are 10 failed fetches and 2 past ``max_files``; the array keeps every part."""
    with FileOrigin(files={}) as o:
        allowed = Capabilities.development(file_origins=[o.url])
        with ScriptedProvider([assistant_text("no files")]) as provider:
            spec = spec_for(provider, [], session={})
            async with running_worker(
                temporal_env, task_queue, Registry(), capabilities=allowed
            ) as c:
                agents = AgentClient(c, task_queue=task_queue)
                wanted = [file_part_from_url(f"{o.url}/gone-{k}.pdf") for k in range(12)]
                sid = await agents.start(spec, user_message("read", *wanted))
                await agents.session(sid).wait(timeout=60)
                status = await agents.session(sid).status()
                messages = await agents.session(sid).messages()
                await agents.session(sid).end()
        sent = provider.requests[0].body["messages"][0]["content"]
    failed = "[file omitted: it could not be fetched (HTTP 404)]"
    assert status.files_left_out[0] == f"10 x {failed}"
    assert status.files_left_out[1].startswith("2 x [file omitted: this request already took")
    assert len(status.files_left_out) == 2
    assert sum(part.get("text", "").startswith("[file omitted") for part in sent) == 12
    assert len(o.asked) == 10
    [asked] = [m for m in messages if isinstance(m, UserMessage)]
    kept = asked.content
    assert isinstance(kept, list) and sum(isinstance(p, FilePart) for p in kept) == 12
    shown = format_status(status)
    assert f"file left out:  10 x {failed}" in shown
