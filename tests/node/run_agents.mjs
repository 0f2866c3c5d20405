// The official AG-UI client (@ag-ui/client's HttpAgent) against a bread_sync server.
// Usage: node run_agents.mjs <base url>. Prints one JSON object: what each run gave the client.
import { HttpAgent } from "@ag-ui/client";

const base = process.argv[2];

async function run(agent, parameters = {}) {
  const types = [];
  const { result } = await agent.runAgent(parameters, { onEvent: ({ event }) => { types.push(event.type); } });
  return { result: result ?? null, types, interrupts: agent.pendingInterrupts, messages: agent.messages };
}

function user(text) {
  return [{ id: `m-${Math.random().toString(16).slice(2)}`, role: "user", content: text }];
}

const echo = new HttpAgent({ url: `${base}/ag-ui/run`, threadId: `node-echo-${Date.now()}`, initialMessages: user("hello there") });
const said = await run(echo);

const writer = new HttpAgent({ url: `${base}/ag-ui/writer`, threadId: `node-writer-${Date.now()}`, initialMessages: user("rye") });
const paused = await run(writer);
const [interrupt] = paused.interrupts;
const resumed = await run(writer, { resume: [{ interruptId: interrupt.id, status: "resolved", payload: { approved: true } }] });

// Shared state: the client's state reaches the run, and the snapshots bread sends replace it.
const managerThread = `node-manager-${Date.now()}`;
const manager = new HttpAgent({ url: `${base}/ag-ui/manager`, threadId: managerThread, initialMessages: user("go"),
  initialState: { plan: "rye", task: "the client's" } });
const managed = await run(manager);
const stateAfterFirst = structuredClone(manager.state);
manager.addMessage(user("again")[0]);
await run(manager);

console.log(JSON.stringify({
  echo: { result: said.result, types: said.types, text: said.messages.filter((m) => m.role === "assistant").map((m) => m.content) },
  writer: { paused: { types: paused.types, interrupt }, resumed: { result: resumed.result, types: resumed.types, pending: resumed.interrupts } },
  manager: { thread: managerThread, types: managed.types, stateAfterFirst },
}));
