// One AG-UI run with the official client (@ag-ui/client's HttpAgent), for the tests.
// Reads {url, threadId, headers, messages, runId?, resume?} as JSON on stdin; runs the
// agent once; writes each event as a line {"event": ...} as it arrives, then a last
// line {"done": {messages, state, error}}.
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
let error = null;
try {
  await agent.runAgent({ runId: input.runId, resume: input.resume }, {
    onEvent({ event }) { process.stdout.write(JSON.stringify({ event }) + "\n"); },
  });
} catch (failure) {
  error = String(failure && failure.message ? failure.message : failure);
}
process.stdout.write(JSON.stringify({ done: { messages: agent.messages, state: agent.state, error } }) + "\n");
