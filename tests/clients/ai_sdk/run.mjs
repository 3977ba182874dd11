// One request with the AI SDK's own transport (DefaultChatTransport) and reader
// (readUIMessageStream), for the tests. Reads {api, chatId, headers, messages, trigger,
// resume?} as JSON on stdin; sends the messages (or, with resume, asks for the reply
// under way: the transport's reconnectToStream); writes each chunk as a line
// {"chunk": ...} as it arrives, then a last line {"done": {message, error, status}}.
import { DefaultChatTransport, readUIMessageStream } from "ai";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const input = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const transport = new DefaultChatTransport({ api: input.api, headers: input.headers || {} });
let message = null;
let error = null;
let status = null;
try {
  const stream = input.resume
    ? await transport.reconnectToStream({ chatId: input.chatId })
    : await transport.sendMessages({
        chatId: input.chatId,
        messages: input.messages,
        trigger: input.trigger || "submit-message",
        messageId: undefined,
        abortSignal: undefined,
      });
  if (stream === null) {
    status = 204;
  } else {
    const [seen, read] = stream.tee();
    const printing = (async () => {
      for await (const chunk of seen) process.stdout.write(JSON.stringify({ chunk }) + "\n");
    })();
    const last = input.messages && input.messages[input.messages.length - 1];
    const continued = last && last.role === "assistant" ? last : undefined;
    for await (const m of readUIMessageStream({
      stream: read,
      message: continued,
      onError: (e) => { error = String(e && e.message ? e.message : e); },
      terminateOnError: true,
    })) {
      message = m;
    }
    await printing;
  }
} catch (failure) {
  error = String(failure && failure.message ? failure.message : failure);
  if (failure && failure.statusCode) status = failure.statusCode;
}
process.stdout.write(JSON.stringify({ done: { message, error, status } }) + "\n");
