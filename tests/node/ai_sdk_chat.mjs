// The AI SDK's own chat (AbstractChat, what useChat wraps) over DefaultChatTransport, with the
// state useChat keeps in React kept in plain fields: shared by run_ai_sdk.mjs and
// run_ai_sdk_cut.mjs.
import { AbstractChat, DefaultChatTransport } from "ai";

class State {
  status = "ready";
  error = undefined;
  messages = [];
  pushMessage = (message) => { this.messages = [...this.messages, message]; };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (index, message) => { this.messages = this.messages.map((m, i) => (i === index ? message : m)); };
  snapshot = (thing) => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor({ messages = [], errors, ...init }) {
    const state = new State();
    state.messages = messages;
    super({ ...init, state, onError: (error) => errors.push(error.message) });
  }
}

// Chats of the agents of the server at `url`, their errors collected in `errors`.
export const chats = (url, errors) => (agent, init = {}) =>
  new Chat({ transport: new DefaultChatTransport({ api: `${url}/ai-sdk/${agent}` }), errors, ...init });
export const text = (message) => message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
export const last = (chat) => chat.messages.at(-1);

export async function until(check, what, seconds = 20) {
  const deadline = Date.now() + seconds * 1000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
