"use strict";
// The bread_sync playground: run an agent and watch its crumbs, answer its pauses, tail any run.
// A run starts with fetch (either wire, read from its streamed body); a tail is an EventSource,
// which the server answers in SSE and which reconnects by itself with Last-Event-ID.

const $ = (id) => document.getElementById(id);
const ROOT = location.pathname.replace(/_bread\/[^/]*$/, ""); // the API's root, under a url_prefix too
const TERMINAL = new Set(["agent:run:end", "agent:error"]);
const DELTAS = new Set(["text:delta", "reasoning:delta"]); // not durable: aggregated into the log
let key = sessionStorage.getItem("bread-key") || "";
let view = null; // the run on screen

// -- the API ---------------------------------------------------------------------------------

async function api(path, options = {}) {
  const url = new URL(ROOT + path.replace(/^\//, ""), location.href);
  // The key goes to this server only: a path that resolves elsewhere ("//host", "\\host") is refused.
  if (url.origin !== location.origin) throw new Error(`not a path of this server: ${path}`);
  const headers = { ...(options.headers || {}) };
  if (key) headers.Authorization = `Bearer ${key}`;
  const response = await fetch(url, { ...options, headers });
  if (response.status === 401) {
    askForKey();
    throw new Error(key ? "that key was refused: type another" : "this server needs an API key");
  }
  if (!response.ok && response.status !== 204) {
    const body = await response.json().catch(() => ({}));
    const error = body.error || {};
    throw new Error(error.code ? `${error.code}: ${error.message}` : `${response.status} ${error || ""}`);
  }
  return response;
}

const postJson = (path, body) =>
  api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });

function askForKey() {
  $("key-form").hidden = false;
  $("forget-key").hidden = !key;
}

function problem(message) {
  $("problem").textContent = message;
  $("problem").hidden = !message;
}

function guarded(action) {
  return (event) => {
    if (event) event.preventDefault();
    problem("");
    Promise.resolve()
      .then(() => action(event))
      .catch((error) => problem(error.message));
  };
}

// -- the two wires, as one kind of event: {seq, crumb} | {error} | {gap} ---------------------

function fromSse(event, data, id) {
  const body = JSON.parse(data);
  if (event === "gap") return { gap: body.earliestSeq };
  if (body.type === "error") return { error: body.payload };
  return { seq: Number(id), crumb: body.payload };
}

function fromNdjson(line) {
  const frame = JSON.parse(line);
  return frame.type === "gap" ? { gap: frame.earliestSeq } : { seq: frame.seq, crumb: frame.crumb };
}

function sseReader(emit) {
  let buffer = "";
  return (text) => {
    buffer += text.replace(/\r\n?/g, "\n");
    for (let end; (end = buffer.indexOf("\n\n")) >= 0; ) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const fields = { event: "message", data: [], id: "" };
      for (const line of block.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const [name, ...rest] = line.split(":");
        const value = rest.join(":").replace(/^ /, "");
        if (name === "data") fields.data.push(value);
        else fields[name] = value;
      }
      if (fields.data.length) emit(fromSse(fields.event, fields.data.join("\n"), fields.id));
    }
  };
}

function ndjsonReader(emit) {
  let buffer = "";
  return (text) => {
    buffer += text;
    const lines = buffer.split("\n");
    buffer = lines.pop();
    for (const line of lines) if (line.trim()) emit(fromNdjson(line));
  };
}

// Read a fetch response's streamed body into the view, until it ends or the connection drops.
async function readBody(response, target) {
  const sse = (response.headers.get("Content-Type") || "").startsWith("text/event-stream");
  const feed = (sse ? sseReader : ndjsonReader)((event) => target.apply(event));
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      feed(value);
    }
  } catch {
    // the connection dropped, or a newer view aborted it: the caller decides what next
  }
}

// -- a run on screen -------------------------------------------------------------------------

class RunView {
  constructor(title) {
    if (view) view.close();
    view = this;
    this.runId = "";
    this.lastSeq = 0; // the last durable seq shown: nothing at or below it is shown again
    this.segments = []; // the live segments since the last durable crumb: {el, kind, connection, seq}
    this.connection = 0; // counts the streams read, so a segment knows which one it began on
    this.stack = [$("transcript")]; // nested steps, iterations, subagents, tasks
    this.tools = new Map();
    this.aborter = new AbortController();
    this.source = null;
    this.ended = false;
    this.paused = false;
    $("transcript").replaceChildren();
    $("pause").hidden = true;
    $("run-view").hidden = false;
    $("run-target").textContent = title;
    this.setRun("");
    this.setStatus("starting");
    $("seq").textContent = "0";
  }

  close() {
    this.aborter.abort();
    if (this.source) this.source.close();
  }

  setRun(runId) {
    this.runId = runId || this.runId;
    $("run-id").textContent = this.runId;
  }

  setStatus(status) {
    $("status").textContent = status;
    $("status").dataset.status = status;
    $("cancel").disabled = !["queued", "running", "paused", "starting"].includes(status);
  }

  // A run a worker has yet to claim (BREAD_EXECUTOR=huey) is shown queued until its next crumb.
  async showQueued() {
    const shown = this.lastSeq;
    const record = await api(`/runs/${encodeURIComponent(this.runId)}`).then((r) => r.json());
    if (record.status === "queued" && this === view && this.lastSeq === shown && !this.ended) this.setStatus("queued");
  }

  apply(event) {
    if (this !== view) return;
    if (event.gap !== undefined) return this.line(`the log before seq ${event.gap} is gone`, "failure");
    if (event.error) return this.ended || this.fail(event.error);
    const { seq, crumb } = event;
    if (DELTAS.has(crumb.type)) return this.text(seq, crumb.delta, crumb.type);
    if (seq !== 0 && seq <= this.lastSeq) return; // already shown (a reconnect's replay)
    if (crumb.type === "agent:run:continued") this.dropLostText(crumb.afterSeq);
    this.lastSeq = Math.max(this.lastSeq, seq);
    this.segments = [];
    if ($("status").dataset.status === "queued") this.setStatus("running"); // a worker took it
    $("seq").textContent = String(this.lastSeq);
    const render = RENDER[crumb.type];
    if (render) render(this, crumb);
    else this.line(crumb.type);
  }

  // A live delta carries the seq of the last durable crumb. The log's aggregate of a segment (a
  // run of text or of reasoning deltas) has a seq of its own and holds the segment whole, so it
  // replaces what was shown of it, the first live segment of its kind: after a reconnect, the
  // deltas missed while away are in it. (A stream that showed part of the segment itself sends
  // only the rest.) Reasoning is shown dimmed (its own class).
  text(seq, delta, kind) {
    if (seq < this.lastSeq) return;
    const className = kind === "reasoning:delta" ? "reasoning" : "text";
    if (seq === this.lastSeq) {
      let last = this.segments[this.segments.length - 1];
      if (!last || last.kind !== kind) {
        last = { el: this.add("div", className), kind, connection: this.connection, seq };
        this.segments.push(last);
      }
      last.el.textContent += delta;
      return;
    }
    const at = this.segments.findIndex((segment) => segment.kind === kind);
    const open = at < 0 ? null : this.segments.splice(at, 1)[0];
    const el = open ? open.el : this.add("div", className);
    const rest = open && open.connection === this.connection && !delta.startsWith(el.textContent);
    el.textContent = rest ? el.textContent + delta : delta;
    this.lastSeq = seq;
    $("seq").textContent = String(seq);
  }

  // A run carried on after its process died: the text streamed live after afterSeq was never
  // logged, and the model call that streamed it is made again, so the segments showing it go.
  dropLostText(afterSeq) {
    for (const segment of this.segments) if (segment.seq >= afterSeq) segment.el.remove();
  }

  add(tag, className, text) {
    const el = document.createElement(tag);
    if (className) el.className = className;
    if (text !== undefined) el.textContent = text;
    this.stack[this.stack.length - 1].append(el);
    return el;
  }

  line(text, className = "line") {
    return this.add("div", className, text);
  }

  open(label, kind) {
    const details = this.add("details", `nested ${kind}`);
    details.open = true;
    details.append(Object.assign(document.createElement("summary"), { textContent: label }));
    this.stack.push(details);
  }

  shut(note) {
    if (note !== undefined) this.line(note);
    if (this.stack.length > 1) this.stack.pop();
  }

  tool(id, name) {
    if (!this.tools.has(id)) {
      const el = this.add("div", "tool");
      el.append(Object.assign(document.createElement("span"), { className: "call", textContent: `${name}(` }));
      this.tools.set(id, el);
    }
    return this.tools.get(id);
  }

  fail(error) {
    this.ended = true;
    this.line(`${error.code}: ${error.message}`, "failure");
    this.setStatus(error.code === "RUN_CANCELLED" ? "cancelled" : "failed");
    this.close();
  }

  finish(status) {
    this.ended = true;
    this.setStatus(status);
    this.close();
  }

  // Follow the run from the last durable seq: an EventSource, which resends Last-Event-ID on
  // each reconnect; reopened (with a fresh stream token) if it gives up while the run lives.
  async tail() {
    this.setStatus("following");
    const token = key ? (await postJson("/auth/stream-token", { runId: this.runId }).then((r) => r.json())).token : "";
    if (this !== view || this.ended) return;
    const query = new URLSearchParams({ after: String(this.lastSeq) });
    if (token) query.set("token", token);
    if (this.source) this.source.close();
    const source = new EventSource(`${ROOT}runs/${encodeURIComponent(this.runId)}/stream?${query}`);
    this.source = source;
    const apply = (event) => this.apply(fromSse(event.type, event.data, event.lastEventId));
    source.onmessage = apply;
    source.addEventListener("gap", apply);
    source.onopen = () => {
      this.connection += 1;
      if (!this.ended) this.setStatus(this.paused ? "paused" : "running");
    };
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED && this === view && !this.ended) {
        this.reopen().catch((error) => problem(error.message));
      }
    };
  }

  // The EventSource gave up (a 204 for a run finished at that seq, an expired token, ...).
  async reopen() {
    const record = await api(`/runs/${encodeURIComponent(this.runId)}`).then((r) => r.json());
    if (["completed", "failed", "cancelled", "interrupted"].includes(record.status)) return this.finish(record.status);
    setTimeout(() => this === view && !this.ended && this.tail().catch((e) => problem(e.message)), 1000);
  }

  // A fetched run's body: read it, and tail the run if the connection dropped before its end.
  async follow(response) {
    this.setRun(response.headers.get("Bread-Run-Id"));
    this.connection += 1;
    if (!this.ended) this.setStatus("running");
    await readBody(response, this);
    if (this === view && !this.ended && !this.paused && this.runId) await this.tail();
  }
}

// How each durable crumb is shown.
const json = (value) => JSON.stringify(value);
const RENDER = {
  "agent:run:start": (v, c) => {
    v.setRun(c.runId);
    v.setStatus("running");
    v.line(`${c.agentId} started, session ${c.sessionId}`);
    v.showQueued().catch(() => {});
  },
  "agent:run:end": (v, c) => {
    if (typeof c.output !== "string") v.line(`output: ${json(c.output)}`);
    v.finish("completed");
  },
  "agent:run:continued": (v, c) => v.line(`carried on after seq ${c.afterSeq} (${c.reason}): the text after it is made again`),
  "agent:error": (v, c) => v.fail(c.error),
  "tool:input:start": (v, c) => v.tool(c.toolCallId, c.toolName),
  "tool:input:delta": (v, c) => v.tools.get(c.toolCallId)?.querySelector(".call").append(c.delta),
  "tool:input:end": () => {},
  "tool:call": (v, c) => {
    const el = v.tool(c.toolCallId, c.toolName);
    el.querySelector(".call").textContent = `${c.toolName}(${json(c.input)})`;
  },
  "tool:result": (v, c) => v.tool(c.toolCallId, c.toolName).append(resultLine("result", `→ ${json(c.output)}`)),
  "tool:error": (v, c) => v.tool(c.toolCallId, c.toolName).append(resultLine("error", `✗ ${c.error.code}: ${c.error.message}`)),
  "tool:progress": (v, c) => showProgress(v.tools.get(c.toolCallId), c),
  "human:required": (v, c) => showPause(v, c),
  "human:resumed": (v, c) => {
    v.paused = false;
    $("pause").hidden = true;
    v.setStatus("running");
    v.line(`resumed with ${json(c.response)}`);
  },
  "file:generated": (v, c) => showFile(v, c).catch((error) => problem(error.message)),
  "pipeline:step:start": (v, c) => v.open(`step ${c.index + 1}: ${c.stepName}`, "step"),
  "pipeline:step:end": (v) => v.shut(),
  "loop:start": (v, c) => v.line(`loop ${c.loopId}: at most ${c.maxIterations} iterations`),
  "loop:iteration:start": (v, c) => v.open(`iteration ${c.iteration}`, "iteration"),
  "loop:iteration:end": (v) => v.shut(),
  "loop:end": (v, c) => v.line(`loop ended: ${c.reason}`),
  "subagent:run:start": (v, c) => v.open(`subagent ${c.subagentId}`, "subagent"),
  "subagent:run:end": (v, c) => v.shut(c.status === "completed" ? `→ ${json(c.output)}` : c.status),
  "task:start": (v, c) => v.open(`task ${c.taskId}${c.model ? ` (${c.model})` : ""}`, "task"),
  "task:end": (v, c) => v.shut(`${c.status}${c.durationMs !== undefined ? `, ${c.durationMs} ms` : ""}`),
};

// A call's progress: one line under the call, rewritten by each tool:progress.
function showProgress(call, crumb) {
  if (!call) return;
  let line = call.querySelector(".progress");
  if (!line) call.append((line = resultLine("progress", "")));
  const total = crumb.total == null ? "" : ` / ${crumb.total}`;
  line.textContent = `… ${crumb.progress}${total}${crumb.message ? `: ${crumb.message}` : ""}`;
}

function resultLine(className, text) {
  return Object.assign(document.createElement("div"), { className, textContent: text });
}

function showPause(v, crumb) {
  v.paused = true;
  v.setStatus("paused");
  v.line(`paused: ${crumb.kind} for ${crumb.toolName}`);
  const pause = $("pause");
  pause.replaceChildren();
  pause.hidden = false;
  const ask = (text) => pause.append(Object.assign(document.createElement("p"), { textContent: text }));
  const button = (label, className, response) => {
    const el = Object.assign(document.createElement("button"), { textContent: label, className, type: "button" });
    el.onclick = guarded(() => answer(v, crumb.checkpointId, response()));
    pause.append(el);
    return el;
  };
  if (crumb.kind === "approval") {
    ask(`Approve ${crumb.toolName}(${json(crumb.input)})?`);
    button("Approve", "approve", () => ({ approved: true }));
    button("Deny", "deny", () => ({ approved: false }));
  } else {
    ask(crumb.input && crumb.input.question ? crumb.input.question : `${crumb.toolName} asks: ${json(crumb.input)}`);
    const field = Object.assign(document.createElement("input"), { className: "answer", placeholder: "your answer" });
    pause.append(field);
    button("Answer", "send", () => parsed(field.value, { answer: field.value }));
  }
}

async function answer(v, checkpointId, response) {
  $("pause").hidden = true;
  if (v.source) v.source.close();
  v.source = null;
  const res = await postJson(`/resume/${encodeURIComponent(checkpointId)}`, { response });
  await v.follow(res);
}

// A file of this server's blob store: the only uri the page downloads, with its key.
const FILE_URI = /^\/files\/[0-9a-f]{32}$/;

async function showFile(v, crumb) {
  const el = v.add("div", "file");
  const label = crumb.name || crumb.uri;
  if (!FILE_URI.test(crumb.uri || "")) {
    el.textContent = `${label} (${crumb.uri}: not a file of this server)`; // shown, never fetched
    return;
  }
  const blob = await api(crumb.uri.replace(/^\//, "")).then((r) => r.blob()); // with the bearer
  const url = URL.createObjectURL(blob);
  if ((crumb.mimeType || "").startsWith("image/")) {
    el.append(Object.assign(document.createElement("img"), { src: url, alt: label, title: label }));
  } else {
    el.append(Object.assign(document.createElement("a"), { href: url, download: label, textContent: label }));
  }
}

// -- the forms -------------------------------------------------------------------------------

function parsed(text, otherwise) {
  try {
    const value = JSON.parse(text);
    return value !== null && typeof value === "object" ? value : otherwise;
  } catch {
    return otherwise;
  }
}

async function loadAgents() {
  const agents = await api("/agents").then((r) => r.json());
  // A key may list agents and not pipelines: then there are none to pick.
  const pipelines = await api("/pipelines").then((r) => (r.ok ? r.json() : []));
  $("key-form").hidden = true;
  $("forget-key").hidden = !key;
  const options = agents.map((a) => new Option(a.id, `agent:${a.id}`));
  const flows = pipelines.map((p) => new Option(`pipeline ${p.id}`, `pipeline:${p.id}`));
  $("target").replaceChildren(...options, ...flows);
  $("target").agents = Object.fromEntries(agents.map((a) => [a.id, a]));
  $("target").pipelines = Object.fromEntries(pipelines.map((p) => [p.id, p]));
  await describe();
}

// The agent's input schema as a form: one field per property of its object input.
async function describe() {
  const [kind, id] = $("target").value.split(":");
  const fields = $("fields");
  fields.replaceChildren(Object.assign(document.createElement("legend"), { textContent: "Input" }));
  fields.hidden = true;
  if (kind === "pipeline") {
    const pipeline = $("target").pipelines[id];
    $("description").textContent = [pipeline.description, `steps: ${pipeline.steps.join(" → ")}`]
      .filter(Boolean)
      .join(" · ");
    return;
  }
  $("description").textContent = $("target").agents[id].description || "";
  const detail = await api(`/agents/${encodeURIComponent(id)}`).then((r) => r.json());
  const schema = detail.inputSchema || {};
  const object = schema.properties ? schema : (schema.anyOf || []).find((s) => s.properties);
  if (!object) return;
  for (const [name, property] of Object.entries(object.properties)) {
    const numeric = ["integer", "number"].includes(property.type);
    const input = Object.assign(document.createElement("input"), { name, type: numeric ? "number" : "text" });
    input.dataset.type = property.type;
    const label = Object.assign(document.createElement("label"), { textContent: property.title || name });
    label.append(input);
    fields.append(label);
  }
  fields.hidden = false;
}

function runInput() {
  const text = $("input").value;
  if (text.trim()) return parsed(text, text);
  const values = {};
  for (const input of $("fields").querySelectorAll("input")) {
    if (input.value === "") continue;
    values[input.name] = input.type === "number" ? Number(input.value) : input.value;
  }
  return Object.keys(values).length ? values : null;
}

async function startRun() {
  const [kind, id] = $("target").value.split(":");
  const body = { input: runInput() };
  if ($("session").value.trim()) body.session = { id: $("session").value.trim() };
  const path = `/${kind === "pipeline" ? "pipelines" : "agents"}/${encodeURIComponent(id)}/run`;
  const v = new RunView(`${kind} ${id}`);
  const response = await api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    signal: v.aborter.signal,
  });
  await v.follow(response);
}

async function openRun() {
  const v = new RunView("tail");
  v.setRun($("tail-run").value.trim());
  v.lastSeq = Number($("tail-after").value || 0);
  await v.tail();
}

async function cancelRun() {
  const v = view;
  await api(`/runs/${encodeURIComponent(v.runId)}/cancel`, { method: "POST" });
  if (v.paused) {
    // No stream is open during a pause: follow the run to the RUN_CANCELLED that ends it.
    v.paused = false;
    $("pause").hidden = true;
    await v.tail();
  }
}

async function listSessions() {
  const sessions = await api("/sessions").then((r) => r.json());
  $("sessions").replaceChildren(
    ...sessions.map((s) => {
      const item = Object.assign(document.createElement("li"), { textContent: `${s.id} ` });
      const show = Object.assign(document.createElement("button"), { type: "button", textContent: "history" });
      show.onclick = guarded(() => showHistory(s.id));
      item.append(show);
      return item;
    }),
  );
}

// The most recent runs first, at most RUNS_SHOWN; a row opens its run (tailed from its start).
const RUNS_SHOWN = 50;

async function listRuns() {
  const status = $("runs-status").value;
  const runs = await api(`/runs${status ? `?status=${encodeURIComponent(status)}` : ""}`).then((r) => r.json());
  const rows = runs.slice(-RUNS_SHOWN).reverse().map((run) => {
    const row = document.createElement("tr");
    row.dataset.runId = run.id;
    const open = Object.assign(document.createElement("button"), { type: "button", textContent: run.agentId,
                                                                    title: run.id });
    open.onclick = guarded(() => openRunById(run.id));
    const cells = [run.status, started(run.createdAt), duration(run), run.usage ? String(run.usage.totalTokens) : ""];
    row.append(cell(open), ...cells.map((text) => cell(text)));
    return row;
  });
  $("runs").querySelector("tbody").replaceChildren(...rows);
  $("runs").hidden = false;
}

function cell(content) {
  const td = document.createElement("td");
  td.append(content);
  return td;
}

const started = (iso) => new Date(iso).toLocaleString();

// A run still going has no duration yet; one that ended was last updated when it ended.
function duration(run) {
  if (["running", "queued"].includes(run.status)) return "";
  const seconds = (Date.parse(run.updatedAt) - Date.parse(run.createdAt)) / 1000;
  return seconds < 60 ? `${seconds.toFixed(1)} s` : `${(seconds / 60).toFixed(1)} min`;
}

async function openRunById(runId) {
  $("tail-run").value = runId;
  $("tail-after").value = "0";
  await openRun();
}

async function showHistory(sessionId) {
  const session = await api(`/sessions/${encodeURIComponent(sessionId)}`).then((r) => r.json());
  const history = $("history");
  history.hidden = false;
  history.replaceChildren(Object.assign(document.createElement("h3"), { textContent: session.id }));
  for (const message of session.messages) {
    const content = typeof message.content === "string" ? message.content : json(message.content);
    history.append(Object.assign(document.createElement("p"), { className: `message ${message.role}`,
                                                                 textContent: `${message.role}: ${content}` }));
  }
  const carry = Object.assign(document.createElement("button"), { type: "button", textContent: "Continue this session" });
  carry.onclick = () => {
    $("session").value = session.id;
    $("input").focus();
  };
  history.append(carry);
}

$("run-form").addEventListener("submit", guarded(startRun));
$("tail-form").addEventListener("submit", guarded(openRun));
$("target").addEventListener("change", guarded(describe));
$("list-sessions").addEventListener("click", guarded(listSessions));
$("runs-form").addEventListener("submit", guarded(listRuns));
$("cancel").addEventListener("click", guarded(cancelRun));
$("key-form").addEventListener("submit", guarded(() => {
  key = $("key").value.trim();
  sessionStorage.setItem("bread-key", key);
  return loadAgents();
}));
$("forget-key").addEventListener("click", () => {
  key = "";
  sessionStorage.removeItem("bread-key");
  askForKey();
});
guarded(loadAgents)();
