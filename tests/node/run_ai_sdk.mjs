// The AI SDK's own chat (AbstractChat, what useChat wraps), DefaultChatTransport and
// readUIMessageStream, unchanged, against a bread_sync server's AI SDK routes: prints what it saw
// as one JSON object (tests/integration/test_ai_sdk_client.py).
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
  readUIMessageStream,
} from "ai";
import { chats, last, text, until } from "./ai_sdk_chat.mjs";

const [url] = process.argv.slice(2);
const api = (agent) => `${url}/ai-sdk/${agent}`;
const errors = [];

const chatOf = chats(url, errors);

async function readAll(stream, message) {
  let seen;
  for await (const each of readUIMessageStream({ stream, message, terminateOnError: true })) seen = each;
  return seen;
}

const user = (words) => ({ id: `u_${Math.random().toString(36).slice(2)}`, role: "user", parts: [{ type: "text", text: words }] });
const seen = {};

// Text.
const echo = chatOf("echo");
await echo.sendMessage({ text: "hello there" });
seen.echo = { status: echo.status, roles: echo.messages.map((m) => m.role), text: text(last(echo)), parts: last(echo).parts.map((p) => p.type) };

// Tools, a subagent and a task, run on the server.
const manager = chatOf("manager");
await manager.sendMessage({ text: "go" });
seen.manager = {
  text: text(last(manager)),
  tools: last(manager).parts.filter((p) => p.type.startsWith("tool-")).map((p) => ({ type: p.type, state: p.state, output: p.output })),
  data: last(manager).parts.filter((p) => p.type.startsWith("data-")).map((p) => ({ type: p.type, status: p.data.status })),
};

// A file, fetched from where the part says.
const artist = chatOf("artist");
await artist.sendMessage({ text: "draw" });
const file = last(artist).parts.find((p) => p.type === "file");
const fetched = await fetch(new URL(file.url, url));
seen.artist = { text: text(last(artist)), mediaType: file.mediaType, status: fetched.status, type: fetched.headers.get("content-type") };

// An approval, answered as useChat answers it: the next request is sent automatically.
const writer = chatOf("writer", { sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses });
await writer.sendMessage({ text: "rye" });
const asked = last(writer).parts.find((p) => p.type === "tool-publish");
seen.writerPaused = { state: asked.state, approvalId: asked.approval.id, input: asked.input, count: writer.messages.length };
await writer.addToolApprovalResponse({ id: asked.approval.id, approved: true });
await until(() => writer.status === "ready" && text(last(writer)).includes("Published."), "the writer's continuation");
const published = last(writer).parts.find((p) => p.type === "tool-publish");
seen.writer = { count: writer.messages.length, text: text(last(writer)), state: published.state, output: published.output };

// An input tool's call, answered with its output.
const interviewer = chatOf("interviewer", { sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls });
await interviewer.sendMessage({ text: "hi" });
const question = last(interviewer).parts.find((p) => p.type === "tool-ask_user");
seen.interviewerPaused = { state: question.state, input: question.input };
await interviewer.addToolOutput({ tool: "ask_user", toolCallId: question.toolCallId, output: "Ada" });
await until(() => interviewer.status === "ready" && text(last(interviewer)).includes("Thanks"), "the interviewer's continuation");
seen.interviewer = { text: text(last(interviewer)) };

// A stream cut mid-run, then resumed: the transport's reconnect, and a chat resuming as a page does.
const slow = new DefaultChatTransport({ api: api("slow") });
const cut = new AbortController();
const first = [user("12")];
const partial = slow.sendMessages({ chatId: "resumed-chat", messages: first, trigger: "submit-message", abortSignal: cut.signal });
const reader = (await partial).getReader();
const before = [];
while (before.filter((c) => c.type === "text-delta").length < 2) {
  const { value, done } = await reader.read();
  if (done) throw new Error("the slow run ended before the cut");
  before.push(value);
}
cut.abort();
const resumed = await readAll(await slow.reconnectToStream({ chatId: "resumed-chat" }));
seen.resumed = { before: before.map((c) => c.type), parts: resumed.parts.map((p) => p.type), text: text(resumed) };
seen.afterEnd = await slow.reconnectToStream({ chatId: "resumed-chat" });

const again = new AbortController();
const second = slow.sendMessages({ chatId: "reloaded-chat", messages: first, trigger: "submit-message", abortSignal: again.signal });
const secondReader = (await second).getReader();
await secondReader.read();
again.abort();
const reloaded = chatOf("slow", { id: "reloaded-chat", messages: first });
await reloaded.resumeStream();
seen.reloaded = { roles: reloaded.messages.map((m) => m.role), text: text(last(reloaded)), status: reloaded.status };

// Stop: the SDK's stop() aborts the fetch; the stop route cancels the run.
const stopped = chatOf("slow", { id: "stopped-chat" });
const sending = stopped.sendMessage({ text: "100" });
await until(() => stopped.messages.length === 2 && text(last(stopped)).length > 0, "the first tick");
const runId = last(stopped).metadata.runId;
await stopped.stop();
const stop = await fetch(`${api("slow")}/stopped-chat/stop`, { method: "POST" });
await sending;
const run = async () => (await fetch(`${url}/runs/${runId}`)).json();
let record = await run();
for (let i = 0; i < 200 && record.status !== "cancelled"; i++) {
  await new Promise((resolve) => setTimeout(resolve, 25));
  record = await run();
}
seen.stop = { status: stop.status, body: await stop.json(), run: record.status, runId, again: (await fetch(`${api("slow")}/stopped-chat/stop`, { method: "POST" })).status };

// A malformed body: 400 before any run, the SDK raising the body.
try {
  await readAll(await slow.sendMessages({ chatId: "x", messages: [], trigger: "submit-message" }));
  seen.invalid = "not raised";
} catch (error) {
  seen.invalid = error.message;
}

seen.errors = errors;
console.log(JSON.stringify(seen));
