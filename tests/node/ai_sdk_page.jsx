// A small chat page on useChat (@ai-sdk/react), unchanged, for the writer: one full chat with an
// approval (tests/browser/test_ai_sdk_browser.py bundles it with build_ai_sdk_page.mjs).
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";
import { useState } from "react";
import { createRoot } from "react-dom/client";

function Part({ part, approve }) {
  if (part.type === "text") return <span className="text">{part.text}</span>;
  if (part.type !== "tool-publish") return null;
  return (
    <span className="tool" data-state={part.state}>
      {part.state === "approval-requested" && (
        <button id="approve" type="button" onClick={() => approve({ id: part.approval.id, approved: true })}>
          Approve publishing {part.input.title}
        </button>
      )}
      {part.state === "output-available" && <span className="output">{JSON.stringify(part.output)}</span>}
    </span>
  );
}

function App() {
  const { messages, sendMessage, addToolApprovalResponse, status, error } = useChat({
    transport: new DefaultChatTransport({ api: "/ai-sdk/writer" }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [input, setInput] = useState("");
  const send = (event) => {
    event.preventDefault();
    sendMessage({ text: input });
    setInput("");
  };
  return (
    <main>
      <p id="status">{status}</p>
      {error && <p id="error">{error.message}</p>}
      <ol id="messages">
        {messages.map((message) => (
          <li key={message.id} className={message.role}>
            {message.parts.map((part, index) => (
              <Part key={index} part={part} approve={addToolApprovalResponse} />
            ))}
          </li>
        ))}
      </ol>
      <form onSubmit={send}>
        <input id="input" value={input} onChange={(event) => setInput(event.target.value)} />
        <button id="send" type="submit">Send</button>
      </form>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<App />);
