"""The MCP tools of a bread instance, and the results of their calls: sans-IO.

One tool per agent, ``agent_<agentId>``, one per task, ``task_<taskId>``, and ``resume``, which
continues a paused run. A tool's listing is an ``mcp_types.Tool``; what a call ends with (the
run's last crumb, a task's output, an error) becomes an ``mcp_types.CallToolResult``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from mcp_types import CallToolResult, ProgressNotification, ProgressNotificationParams, TextContent, Tool
from pydantic import BaseModel

from ... import crumbs as c
from ...agents import Agent, Toolset
from ...crumbs import dumps
from ...errors import INPUT_INVALID, BreadError, internal_error
from ...tasks import Task

RESUME = "resume"
AGENT_PREFIX = "agent_"
TASK_PREFIX = "task_"
#: The argument that carries an input with no object form (a plain text, most often).
INPUT = "input"
TEXT_INPUT = {"type": "string", "description": "What the agent is asked, as text."}
RESUME_SCHEMA = {
    "type": "object",
    "properties": {
        "checkpointId": {"type": "string", "description": "The paused call's checkpointId."},
        "response": {
            "type": "object",
            "description": 'The human\'s answer: {"approved": true|false} for an approval, the answer for an input.',
        },
    },
    "required": ["checkpointId", "response"],
}
#: The keys of a paused call's structuredContent besides ``status``, as its crumb has them.
PAUSE_KEYS = ("checkpointId", "kind", "toolName", "input")


@dataclass(frozen=True)
class McpTool:
    """One tool: what ``tools/list`` shows of it and what a call of it runs."""

    kind: Literal["agent", "task", "resume"]
    #: The agent's or task's id; None for ``resume``.
    target: str | None
    listing: Tool
    #: The call's arguments are ``{"input": <the input>}``: the input has no object form.
    wrapped: bool = False
    #: A wrapped input must be a string (an agent with no input model).
    text: bool = False

    @property
    def name(self) -> str:
        return self.listing.name

    def run_input(self, arguments: dict[str, Any]) -> Any:
        """What the agent or task is given for these arguments; ``INPUT_INVALID`` for arguments
        a wrapped input is missing from."""
        if not self.wrapped:
            return arguments
        value = arguments.get(INPUT)
        if value is None or (self.text and not isinstance(value, str)):
            wanted = "a string" if self.text else "given"
            raise BreadError(INPUT_INVALID, f"the arguments of {self.name} need {INPUT!r}, {wanted}")
        return value


def tool_table(agents: list[Agent], tasks: list[Task], every_agent: dict[str, Agent]) -> dict[str, McpTool]:
    """The tools of these agents and tasks, and ``resume``, by name; ``every_agent``: the
    instance's agents, which subagent tools name."""
    exposed = [agent_tool(agent, can_pause(agent, every_agent)) for agent in agents]
    table = [*exposed, *(task_tool(task) for task in tasks), resume_tool()]
    return {tool.name: tool for tool in table}


def can_pause(agent: Agent, every_agent: dict[str, Agent], seen: frozenset[str] = frozenset()) -> bool:
    """Whether a run of ``agent`` can pause for a human: one of its tools asks, or a subagent's."""
    for tool in agent.tools:
        if isinstance(tool, Toolset):  # known without listing: its server may be this one, not up yet
            if tool.pauses:
                return True
            continue
        if tool.human_kind is not None:
            return True
        child = every_agent.get(tool.target) if tool.kind == "subagent" else None
        if child is not None and child.id not in seen and can_pause(child, every_agent, seen | {agent.id}):
            return True
    return False


def agent_tool(agent: Agent, pauses: bool) -> McpTool:
    """An agent's tool; one that ``pauses`` declares no output schema: a paused call has no output."""
    schema, wrapped = input_schema(agent.input_schema)
    output = None
    if agent.output_schema is not None and agent.output_format != "text" and not pauses:
        output = agent.output_schema.model_json_schema()
    listing = Tool(
        name=f"{AGENT_PREFIX}{agent.id}",
        description=agent.description or None,
        input_schema=schema,
        output_schema=output,
    )
    return McpTool("agent", agent.id, listing, wrapped, text=agent.input_schema is None)


def task_tool(task: Task) -> McpTool:
    schema, wrapped = input_schema(task.input_schema)
    listing = Tool(
        name=f"{TASK_PREFIX}{task.id}",
        description=task.description or None,
        input_schema=schema,
        output_schema=task.output_schema.model_json_schema(),
    )
    return McpTool("task", task.id, listing, wrapped)


def resume_tool() -> McpTool:
    description = "Continue a paused call: answer the human's question, or approve (or deny) the paused tool."
    return McpTool("resume", None, Tool(name=RESUME, description=description, input_schema=RESUME_SCHEMA))


def input_schema(model: type[BaseModel] | None) -> tuple[dict[str, Any], bool]:
    """A tool's input schema for an input model, and whether it wraps the input as ``input``.

    MCP tools take an object. A model's object form is its schema, or the object branch of a
    schema that also takes a text (the demo's ``OrText`` models); an input with none (no model:
    a text) is wrapped."""
    if model is None:
        return _wrapped(TEXT_INPUT), True
    schema = model.model_json_schema()
    if schema.get("type") == "object":
        return schema, False
    for branch in schema.get("anyOf", ()):
        if branch.get("type") == "object":
            return ({**branch, "$defs": schema["$defs"]} if "$defs" in schema else branch), False
    return _wrapped(schema), True


def _wrapped(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {INPUT: schema}, "required": [INPUT]}


# results


def completed(tool: McpTool, output: Any) -> CallToolResult:
    """A call's output: as text, and as structured content where the tool declares its schema."""
    text = output if isinstance(output, str) else dumps(output)
    structured = output if tool.listing.output_schema is not None else None
    return CallToolResult(content=[TextContent(text=text)], structured_content=structured)


def failed(error: BreadError) -> CallToolResult:
    """A call that failed: ``isError``, its code and message as text and as structured content."""
    text = f"{error.code}: {error.message}"
    structured = {"code": error.code, "message": error.message}
    return CallToolResult(content=[TextContent(text=text)], structured_content=structured, is_error=True)


def paused(crumb: dict[str, Any]) -> CallToolResult:
    """A call whose run paused for a human, from its ``human:required`` crumb."""
    pause = {"status": "paused", **{key: crumb.get(key) for key in PAUSE_KEYS}}
    text = (
        f"The run paused for a human ({crumb['kind']} of {crumb['toolName']}). Continue it with the "
        f"{RESUME} tool, checkpointId {crumb['checkpointId']}."
    )
    return CallToolResult(content=[TextContent(text=text)], structured_content=pause)


def ended(tool: McpTool, crumb: dict[str, Any] | None) -> CallToolResult:
    """The result of a run that ``crumb`` (its last) ended or paused."""
    kind = crumb["type"] if crumb is not None else None
    if kind == c.AGENT_RUN_END:
        return completed(tool, crumb.get("output"))
    if kind == c.HUMAN_REQUIRED:
        return paused(crumb)
    if kind == c.AGENT_ERROR:
        error = crumb.get("error")
        return failed(error if isinstance(error, BreadError) else BreadError.from_wire(error or {}))
    return failed(internal_error(RuntimeError(f"the run's stream stopped at {kind or 'its start'}")))


#: The ``_meta`` of a progress notification whose message is the model's thinking, not its answer.
THOUGHT_META = {"bread-sync/thought": True}


def progress(token: str | int, count: int, crumb: dict[str, Any]) -> dict[str, Any]:
    """The ``notifications/progress`` of a call's ``count``-th crumb: its text for a text or a
    reasoning delta (a reasoning one marked ``_meta: {"bread-sync/thought": true}``: a host
    shows it as progress, and one that knows the mark tells it from the answer), else its type."""
    kind = crumb["type"]
    message = crumb.get("delta") if kind in c.NOT_DURABLE else kind
    meta = THOUGHT_META if kind == c.REASONING_DELTA else None
    params = ProgressNotificationParams(progress_token=token, progress=count, message=message, _meta=meta)
    return {"jsonrpc": "2.0", **ProgressNotification(params=params).model_dump(by_alias=True, exclude_none=True)}
