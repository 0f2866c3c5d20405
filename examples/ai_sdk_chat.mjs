// Chat with bread_sync's agents through the Vercel AI SDK's own transport and stream reader, as
// useChat does: echo's answer, the writer's tool approval answered, and the chat's run stopped.
//
//     .venv/bin/bread-sync start                                        # in one terminal
//     cd examples && npm install --no-save ai@6 && node ai_sdk_chat.mjs  # in another
//
// BREAD_URL names another server (default http://127.0.0.1:3000); each demo agent's chat route
// is its /ai-sdk/<agentId>.
import { DefaultChatTransport, readUIMessageStream } from "ai";

const base = process.env.BREAD_URL ?? "http://127.0.0.1:3000";
const transport = (agent) => new DefaultChatTransport({ api: `${base}/ai-sdk/${agent}` });
const userSays = (text) => ({ id: crypto.randomUUID(), role: "user", parts: [{ type: "text", text }] });
const textOf = (message) => message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");

// One request, its stream read into the assistant message (continuing `message` if given).
async function ask(agent, chatId, messages, message) {
  const stream = await transport(agent).sendMessages({ chatId, messages, trigger: "submit-message" });
  let last;
  for await (const each of readUIMessageStream({ stream, message })) last = each;
  return last;
}

const echoed = await ask("echo", crypto.randomUUID(), [userSays("hello from the AI SDK")]);
console.log("echo:", textOf(echoed));

// The writer drafts, then its publish call waits for an approval: a tool part the UI renders.
const chat = crypto.randomUUID();
const question = userSays("sourdough");
const paused = await ask("writer", chat, [question]);
const call = paused.parts.find((p) => p.type === "tool-publish");
const drafted = textOf(paused);
console.log("writer:", drafted, "/", call.state, JSON.stringify(call.input));

// What useChat's addToolApprovalResponse does, then the next request carries it.
call.state = "approval-responded";
call.approval = { ...call.approval, approved: true };
const answered = await ask("writer", chat, [question, paused], paused);
const published = answered.parts.find((p) => p.type === "tool-publish");
console.log("answered:", textOf(answered).slice(drafted.length), "/", published.state, JSON.stringify(published.output));

// stop() in useChat only aborts its fetch: the stop route cancels the run itself.
const slowChat = crypto.randomUUID();
const running = ask("slow", slowChat, [userSays("50")]);
let stopped;
for (let i = 0; i < 100 && stopped === undefined; i++) {
  await new Promise((resolve) => setTimeout(resolve, 50));
  const response = await fetch(`${base}/ai-sdk/slow/${slowChat}/stop`, { method: "POST" });
  if (response.status === 200) stopped = await response.json();
}
await running; // its stream ends with an abort chunk
console.log("stopped:", stopped ? "cancelled" : "not running");
