// One AG-UI run with the official client (@ag-ui/client's HttpAgent), for the tests.
// Reads {url, threadId, headers, messages} as JSON on stdin; runs the agent once; writes
// {events, messages, state, error} as JSON on stdout (the events in the order received).
import { HttpAgent } from "@ag-ui/client";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const input = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const agent = new HttpAgent({
  url: input.url,
  headers: input.headers || {},
  threadId: input.threadId,
  initialMessages: input.messages || [],
});
const events = [];
let error = null;
try {
  await agent.runAgent({ runId: input.runId }, {
    onEvent({ event }) { events.push(event); },
  });
} catch (failure) {
  error = String(failure && failure.message ? failure.message : failure);
}
process.stdout.write(JSON.stringify({ events, messages: agent.messages, state: agent.state, error }));
