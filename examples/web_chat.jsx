// The web chat of examples/web_chat.py: the AI SDK's useChat on the gateway's AI SDK door.
// Each message's parts are shown as they stream: reasoning, text, and each tool call
// with its state; a call waiting for a person has Approve and Deny buttons.
import { useChat } from "@ai-sdk/react";
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from "ai";
import { useState } from "react";
import { createRoot } from "react-dom/client";

const params = new URLSearchParams(location.search);
const chatId = params.get("chat") || crypto.randomUUID();
const token = params.get("token");
const headers = token ? { Authorization: `Bearer ${token}` } : {};

// The chat's past messages, so a reloaded page shows them and can answer a call that
// waits for a person; a chat not begun yet is a 404, shown as an empty chat.
async function pastMessages() {
  const response = await fetch(`/api/ai-sdk/chat/${encodeURIComponent(chatId)}/messages`, { headers });
  return response.ok ? response.json() : [];
}

function Part({ part, answer }) {
  if (part.type === "text") return <p className="text">{part.text}</p>;
  if (part.type === "reasoning") return <p className="reasoning">{part.text}</p>;
  if (part.type !== "dynamic-tool") return null;
  return (
    <div className="tool" data-state={part.state}>
      <code>{part.toolName}({JSON.stringify(part.input)})</code>
      {part.state === "approval-requested" && (
        <span>
          <button onClick={() => answer(part.approval.id, true)}>Approve</button>
          <button onClick={() => answer(part.approval.id, false)}>Deny</button>
        </span>
      )}
      {part.state === "output-available" && <p className="output">{part.output}</p>}
      {part.state === "output-error" && <p className="output">{part.errorText}</p>}
      {part.state === "output-denied" && <p className="output">denied</p>}
    </div>
  );
}

function Chat({ past }) {
  const { messages, sendMessage, addToolApprovalResponse, status, error } = useChat({
    id: chatId,
    messages: past,
    transport: new DefaultChatTransport({ api: "/api/ai-sdk/chat", headers }),
    // once every call waiting for a person is answered, the answers go to the session
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [input, setInput] = useState("");
  const answer = (id, approved) => addToolApprovalResponse({ id, approved });
  return (
    <main data-status={status}>
      {messages.map((message) => (
        <div key={message.id} className="message" data-role={message.role}>
          {message.parts.map((part, i) => (
            <Part key={i} part={part} answer={answer} />
          ))}
        </div>
      ))}
      {error && <p className="error">{error.message}</p>}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          sendMessage({ text: input });
          setInput("");
        }}
      >
        <input value={input} onChange={(e) => setInput(e.target.value)} placeholder="Say something" />
        <button type="submit" disabled={status !== "ready"}>Send</button>
      </form>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<Chat past={await pastMessages()} />);
