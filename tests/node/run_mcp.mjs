// The official MCP TypeScript client, unchanged, against a bread_sync server: prints what it saw
// of the demo's tools and their calls as one JSON object (tests/integration/test_mcp_client.py).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.argv[2]);
const client = new Client({ name: "bread-sync-tests", version: "1.0.0" });
// Resolved with the HTTP status of the notifications/cancelled the client sends on an abort.
let cancelAnswered;
const cancelled = new Promise((resolve) => {
  cancelAnswered = resolve;
});
const recording = async (input, init) => {
  const response = await fetch(input, init);
  if (typeof init?.body === "string" && init.body.includes('"notifications/cancelled"')) cancelAnswered(response.status);
  return response;
};
const transport = new StreamableHTTPClientTransport(url, { fetch: recording });
await client.connect(transport);

const seen = { version: transport.protocolVersion, server: client.getServerVersion().name, progress: [], messages: [] };
seen.tools = (await client.listTools()).tools.map((tool) => tool.name);
seen.echo = await client.callTool({ name: "agent_echo", arguments: { input: "hello there" } });
seen.counted = await client.callTool({ name: "task_word-count", arguments: { text: "one two three" } });
const onprogress = ({ progress, message }) => {
  seen.progress.push(progress);
  seen.messages.push(message ?? "");
};
seen.ticks = await client.callTool({ name: "agent_slow", arguments: { count: 3, delayMs: 10 } }, undefined, { onprogress });
seen.refused = await client.callTool({ name: "agent_slow", arguments: { count: -1, delayMs: 0 } });
seen.paused = await client.callTool({ name: "agent_interviewer", arguments: { input: "hi" } });
const answer = { checkpointId: seen.paused.structuredContent.checkpointId, response: { answer: "Ada" } };
seen.resumed = await client.callTool({ name: "resume", arguments: answer });
try {
  await client.callTool({ name: "agent_nobody", arguments: {} });
} catch (error) {
  seen.unknown = error.code;
}
// A call the caller gives up on: the client sends notifications/cancelled, the server cancels its run.
const controller = new AbortController();
const abandoned = client.callTool({ name: "agent_slow", arguments: { count: 1000, delayMs: 20 } }, undefined, {
  signal: controller.signal,
});
setTimeout(() => controller.abort(new Error("enough")), 300);
try {
  await abandoned;
} catch (error) {
  seen.aborted = error.message;
}
seen.cancelStatus = await cancelled;
await transport.terminateSession();
await client.close();
process.stdout.write(JSON.stringify(seen));
