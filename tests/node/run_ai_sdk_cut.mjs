// A chat of the AI SDK (AbstractChat over DefaultChatTransport, unchanged) whose connection the
// test cuts inside the slow agent's text, then resumed in place as an app does after the error:
// chat.resumeStream(). Prints "cut" once the message holds two ticks, waits for a line on stdin
// (the proxy has cut it), then prints what the chat holds as one JSON object
// (tests/integration/test_ai_sdk_client.py).
import { createInterface } from "node:readline";
import { chats, last, text, until } from "./ai_sdk_chat.mjs";

const [url] = process.argv.slice(2);
const errors = [];
const chat = chats(url, errors)("slow", { id: "cut-chat" });
const sending = chat.sendMessage({ text: "40" });
await until(() => chat.messages.length === 2 && (text(last(chat)).match(/tick/g) || []).length >= 2, "two ticks");
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
process.stdout.write("cut\n");
await lines.next();
await sending;
const before = { status: chat.status, text: text(last(chat)) };
await chat.resumeStream();
const roles = chat.messages.map((m) => m.role);
console.log(JSON.stringify({ before, roles, text: text(last(chat)), status: chat.status, errors }));
process.exit(0);
