// The official AG-UI client (@ag-ui/client's HttpAgent) reading one run's stream from <url>.
// Usage: node run_stream.mjs <url>. Prints one JSON object: the events' types and the messages.
import { HttpAgent } from "@ag-ui/client";

const agent = new HttpAgent({ url: process.argv[2], threadId: "thread-carried-on" });
const types = [];
await agent.runAgent({}, { onEvent: ({ event }) => { types.push(event.type); } });
console.log(JSON.stringify({ types, messages: agent.messages }));
