// The official OpenAI TypeScript client, unchanged, against a bread_sync server's OpenAI routes:
// prints what it saw as one JSON object (tests/integration/test_openai_clients.py).
import OpenAI from "openai";

const [url, apiKey] = process.argv.slice(2);
const client = new OpenAI({ apiKey, baseURL: `${url}/v1`, maxRetries: 0 });
const ask = (text) => [{ role: "user", content: text }];
const seen = {};

seen.models = (await client.models.list()).data.map((model) => model.id);

const { data: completion, response } = await client.chat.completions
  .create({ model: "echo", messages: ask("hello there") })
  .withResponse();
seen.chat = { text: completion.choices[0].message.content, runId: response.headers.get("bread-run-id"), bread: completion.bread };

const chunks = [];
for await (const chunk of await client.chat.completions.create({
  model: "echo",
  messages: ask("one two three"),
  stream: true,
  stream_options: { include_usage: true },
})) {
  chunks.push(chunk);
}
seen.chatStream = {
  text: chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? "").join(""),
  finish: chunks.map((chunk) => chunk.choices[0]?.finish_reason).filter(Boolean),
  last: chunks.at(-1),
};

const answer = await client.responses.create({ model: "echo", input: "a response" });
seen.responses = { text: answer.output_text, status: answer.status };

const types = [];
let streamed = "";
let finished;
for await (const event of await client.responses.create({ model: "echo", input: "a streamed response", stream: true })) {
  types.push(event.type);
  if (event.type === "response.output_text.delta") streamed += event.delta;
  if (event.type === "response.completed") finished = event.response;
}
seen.responsesStream = { types, streamed, text: finished.output[0].content[0].text };

try {
  await client.chat.completions.create({ model: "broken", messages: ask("x") });
  seen.error = "not raised";
} catch (error) {
  seen.error = { name: error.constructor.name, status: error.status, code: error.code, type: error.type, message: error.message };
}
try {
  await client.chat.completions.create({ model: "echo", messages: [] });
  seen.invalid = "not raised";
} catch (error) {
  seen.invalid = { status: error.status, code: error.code, param: error.param };
}

const paused = await client.chat.completions.create({ model: "writer", messages: ask("rye") });
const session = { headers: { "Bread-Session-Id": paused.bread.sessionId } };
const resumed = await client.responses.create({ model: "writer", input: "yes" }, session);
seen.paused = { text: paused.choices[0].message.content, bread: paused.bread, resumed: resumed.output_text };

console.log(JSON.stringify(seen));
