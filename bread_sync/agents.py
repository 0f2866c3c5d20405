"""Agents, tools and skills: the declarations a config is made of."""

from __future__ import annotations

import inspect
import logging
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, TypeAdapter, ValidationError

from .cancel import CancelToken
from .errors import INPUT_INVALID, INVALID_REQUEST, OUTPUT_INVALID, BreadError


@dataclass
class ToolContext:
    """What a tool function gets besides its input."""

    run_id: str
    session_id: str
    agent_id: str
    signal: CancelToken
    logger: logging.Logger
    blob_store: Any = None
    #: The run's state: what its caller gave (``Bread.run(state=...)``), else its session's.
    #: Changing it changes nothing stored.
    state: dict[str, Any] = field(default_factory=dict)
    #: What the caller told the run about its world: ``[{description, value}]`` (``context=``).
    context: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class ToolProgress:
    """What a tool function that is a generator yields while it works: logged as a
    ``tool:progress`` crumb of its call (at most one a second per call).

    Long calls (a remote MCP server's tool, a slow job) show that they are alive and how far
    they are; ``total`` is None when the tool does not know it."""

    progress: float
    total: float | None = None
    message: str | None = None


#: What a tool call whose outcome is unknown does when its run is carried on (:class:`Tool`).
ON_REPEAT = ("run", "ask", "fail")


@dataclass
class Tool:
    """A function the model may call.

    ``ask=True`` puts an approval gate in front of it: the run pauses with ``human:required``
    (kind ``approval``) before ``fn`` runs. A ``fn`` that is a generator function reports
    progress: each :class:`ToolProgress` it yields is a ``tool:progress`` crumb, and what it
    returns is its result. ``kind="input"`` makes it an input tool: it has no
    function, and the human's answer is its result.

    ``on_repeat`` says what a call logged without its result means when the run is carried on by
    another process (its own died mid-call): ``"run"`` calls it again (an idempotent tool),
    ``"ask"`` pauses for a human's approval first, ``"fail"`` gives the model a
    ``TOOL_OUTCOME_UNKNOWN`` tool error. A tool gated by ``ask=True`` always asks again.
    """

    name: str
    fn: Callable[[Any, ToolContext], Any] | None = None
    description: str = ""
    input_schema: type[BaseModel] | None = None
    ask: bool = False
    kind: Literal["call", "input", "subagent", "task"] = "call"
    #: The agent (``kind="subagent"``) or task (``kind="task"``) this tool delegates to.
    target: str | None = None
    #: What an input tool's human may answer: a type pydantic validates (a model, ``str | Model``).
    response_schema: Any = None
    on_repeat: Literal["run", "ask", "fail"] = "ask"
    #: The JSON Schema of its input where it has no ``input_schema`` model (a remote MCP tool's).
    json_schema: dict[str, Any] | None = None
    _response: TypeAdapter | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def delegate(self) -> str:
        """The agent or task a ``subagent`` or ``task`` tool calls (a tool made without one is
        refused), else ``""``."""
        return self.target or ""

    def __post_init__(self) -> None:
        if self.kind == "call" and self.fn is None:
            raise TypeError(f"tool {self.name!r} needs a fn, or kind='input' for an input tool")
        if self.kind in ("subagent", "task") and not self.target:
            raise TypeError(f"tool {self.name!r} delegates to nothing: give it a target")
        if self.on_repeat not in ON_REPEAT:
            raise TypeError(f"tool {self.name!r}: on_repeat must be one of {', '.join(ON_REPEAT)}")
        if self.response_schema is not None:  # a schema pydantic cannot read fails here, not at a resume
            self._response = TypeAdapter(self.response_schema)

    def child_input(self, arguments: Any, child: Agent) -> Any:
        """A subagent's input from the call's arguments: the arguments themselves when the
        child has an input schema, else their ``input`` field."""
        if child.input_schema is None and isinstance(arguments, dict):
            return arguments.get("input")
        return arguments

    @property
    def human_kind(self) -> str | None:
        """The ``human:required`` kind this tool pauses for, if any."""
        if self.kind == "input":
            return "input"
        return "approval" if self.ask else None

    def parameters(self) -> dict[str, Any]:
        if self.json_schema is not None:
            return self.json_schema
        if self.input_schema is None:
            return {"type": "object", "properties": {}, "additionalProperties": True}
        return self.input_schema.model_json_schema()

    def validate_input(self, data: Any) -> Any:
        if self.input_schema is None:
            return data
        try:
            return self.input_schema.model_validate(data)
        except ValidationError as exc:
            raise BreadError(INPUT_INVALID, describe_validation(exc, f"tool {self.name!r} input")) from None

    def response_json_schema(self) -> dict[str, Any] | None:
        """The JSON Schema of what this input tool's human may answer, if it says."""
        return self._response.json_schema() if self._response is not None else None

    def validate_response(self, kind: str, response: Any) -> Any:
        """The human's answer to this tool's pause of ``kind``, as JSON-safe data: an approval is
        ``{"approved": bool}`` (else ``INVALID_REQUEST``); an input answer fits the
        ``response_schema``, and without one it may be anything but an approval (else
        ``INPUT_INVALID``)."""
        if kind == "approval" or self._response is None:
            return check_response_kind(kind, response)
        try:
            return self._response.dump_python(self._response.validate_python(response), mode="json")
        except ValidationError as exc:
            raise BreadError(INPUT_INVALID, describe_validation(exc, f"the answer to {self.name!r}")) from None


@runtime_checkable
class Toolset(Protocol):
    """Tools found when a run first needs them, not when the config is made: a remote MCP
    server's (``bread_sync.protocols.mcp.mcp_tools``). It stands in an agent's ``tools``
    beside plain tools.

    Its server may not be up when the config loads (it may be this very server)."""

    #: Whether one of its tools may pause for a human, known without listing them.
    pauses: bool

    def tools(self) -> list[Tool]:
        """Its tools; a ``BreadError`` when they cannot be listed."""
        ...


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    ask: bool = False,
    on_repeat: Literal["run", "ask", "fail"] = "ask",
) -> Any:
    """Make a :class:`Tool` from a function ``fn(input, ctx)``; the docstring describes it and
    the annotation of ``input`` (a pydantic model) is its schema. Usable as ``@tool``,
    ``@tool(ask=True)`` or ``@tool(on_repeat="run")`` (see :class:`Tool`)."""

    def build(func: Callable[..., Any]) -> Tool:
        params = list(inspect.signature(func).parameters)
        schema = typing.get_type_hints(func).get(params[0]) if params else None
        is_model = isinstance(schema, type) and issubclass(schema, BaseModel)
        return Tool(
            name=name or func.__name__,
            fn=func,
            description=inspect.getdoc(func) or "",
            input_schema=schema if is_model else None,
            ask=ask,
            on_repeat=on_repeat,
        )

    return build(fn) if fn is not None else build


def subagent(agent_id: str, description: str = "", name: str | None = None) -> Tool:
    """A tool that delegates to another agent; its crumbs join the caller's stream, framed by
    ``subagent:run:start`` / ``subagent:run:end``, and its output is the tool's result."""
    return Tool(
        name=name or agent_id, description=description or f"Ask the {agent_id} agent.", kind="subagent", target=agent_id
    )


def task_tool(task_id: str, description: str = "", name: str | None = None) -> Tool:
    """A tool that runs a task (``task:start`` / ``task:end``); its validated output is the result."""
    return Tool(
        name=name or task_id, description=description or f"Run the {task_id} task.", kind="task", target=task_id
    )


def input_tool(
    name: str, description: str = "", input_schema: type[BaseModel] | None = None, response_schema: Any = None
) -> Tool:
    """A tool that asks the human; the resume's ``response`` becomes its result.

    ``response_schema`` (a pydantic model, or any type pydantic validates, e.g. ``str | Answer``)
    checks the answer before the checkpoint is claimed: one that fails it is ``INPUT_INVALID``."""
    return Tool(
        name=name, description=description, input_schema=input_schema, kind="input", response_schema=response_schema
    )


def check_response_kind(kind: str, response: Any) -> Any:
    """``response`` if it answers a pause of ``kind``: an approval is ``{"approved": bool}``, and
    an input pause is never answered with one (that answer was meant for another pause)."""
    is_approval = isinstance(response, dict) and isinstance(response.get("approved"), bool)
    if kind == "approval" and not is_approval:
        raise BreadError(INVALID_REQUEST, 'an approval needs a response {"approved": true|false}')
    if kind == "input" and is_approval and len(response) == 1:
        raise BreadError(INPUT_INVALID, "this pause asks for an answer, not an approval")
    return response


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    instructions: str


@runtime_checkable
class OutputParser(Protocol):
    def parse(self, text: str) -> Any: ...


@dataclass
class Agent:
    """An agent: a model, a system prompt, tools and the shapes of its input and output.

    ``folder`` names an agent folder: its ``prompt.md`` is the prompt (unless ``prompt`` is
    given) and each ``skills/<name>/SKILL.md`` (or ``<name>/SKILL.md``) is a skill.
    ``output`` is ``"text"``, ``"json"`` (parsed, validated by ``output_schema``; no tools) or
    an object with ``parse(text)``. ``before_run(input, ctx)`` may return a new input.
    """

    id: str
    model: Any = "echo"
    prompt: str = ""
    #: Its tools: :class:`Tool` objects, and :class:`Toolset` objects listed when first needed.
    tools: list[Tool | Toolset] = field(default_factory=list)
    input_schema: type[BaseModel] | None = None
    output: str | OutputParser = "text"
    output_schema: type[BaseModel] | None = None
    before_run: Callable[[Any, ToolContext], Any] | None = None
    folder: str | Path | None = None
    description: str = ""
    max_steps: int = 25
    skills: dict[str, Skill] = field(default_factory=dict)
    #: Repeat the agent until a stop condition (see :class:`bread_sync.loops.Loop`).
    loop: Any = None
    #: What a second run on a busy session does: ``reject``, ``enqueue`` or ``interrupt``.
    session_policy: Literal["reject", "enqueue", "interrupt"] = "reject"
    #: Whether a run of this agent whose process died (or shut down) is carried on by another
    #: process from its last durable crumb; False: it ends ``RUN_INTERRUPTED`` instead.
    continue_after_crash: bool = True
    #: At most this many runs of the agent run at once, across every worker and replica sharing
    #: the store; a run past it waits queued for a worker's claim (engine/queued.py), never 503.
    max_concurrent_runs: int | None = None

    def __post_init__(self) -> None:
        if self.max_concurrent_runs is not None and self.max_concurrent_runs < 1:
            raise ValueError(f"agent {self.id!r}: max_concurrent_runs must be at least 1, or None for no cap")
        if self.folder is not None:
            folder = Path(self.folder)
            if not self.prompt and (folder / "prompt.md").is_file():
                self.prompt = (folder / "prompt.md").read_text(encoding="utf-8")
            self.skills = {**load_skills(folder), **self.skills}
        if self.output == "json" and self.tools:
            raise TypeError(f"agent {self.id!r}: a json-output agent is given no tools")

    @property
    def output_format(self) -> str:
        return self.output if isinstance(self.output, str) else "custom"

    @property
    def model_name(self) -> str:
        """``"provider:name"``: ``"echo"`` is ``"echo:echo"``; a provider object is its ``name`` and
        its ``model``, or this agent's id for a provider without one (a script)."""
        if isinstance(self.model, str):
            provider, _, name = self.model.partition(":")
            return f"{provider}:{name or provider}"
        return f"{getattr(self.model, 'name', 'custom')}:{getattr(self.model, 'model', None) or self.id}"

    def all_tools(self) -> list[Tool]:
        """Its tools, each toolset's listed (a toolset lists them once and keeps them)."""
        found: list[Tool] = []
        for each in self.tools:
            found.extend(each.tools() if isinstance(each, Toolset) else [each])
        return found

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.all_tools() if t.name == name), None)

    def validate_input(self, data: Any) -> Any:
        """Validated input as JSON-safe data; ``INPUT_INVALID`` with what failed."""
        if self.input_schema is None:
            return data
        try:
            return self.input_schema.model_validate(data).model_dump(mode="json")
        except ValidationError as exc:
            raise BreadError(INPUT_INVALID, describe_validation(exc, "input")) from None

    def parse_output(self, text: str) -> Any:
        if self.output == "text":
            return text
        if self.output != "json":
            return self.output.parse(text)
        try:
            if self.output_schema is None:
                import json

                return json.loads(text)
            return self.output_schema.model_validate_json(text).model_dump(mode="json")
        except (ValueError, ValidationError) as exc:
            raise BreadError(OUTPUT_INVALID, f"model output is not valid JSON output: {exc}") from None


#: What a listing of agents (``GET /agents``, a client's manifest) says of each one.
SUMMARY_KEYS = ("id", "model", "outputFormat", "description")

log = logging.getLogger("bread_sync")


@dataclass(frozen=True)
class ServedAgent:
    """An agent an instance serves, under the id it is served by: its own :class:`Agent`, or
    (``remote``) another server's agent, which describes itself. Every listing of agents
    (``GET /agents``, the in-process client's manifest, the MCP tools) reads these, so they agree."""

    id: str
    agent: Any
    remote: bool = False

    def summary(self) -> dict[str, Any]:
        """What ``GET /agents`` and a client's manifest say of it."""
        if self.remote:
            described = self.describe()
            return {key: described.get(key) for key in SUMMARY_KEYS}
        agent = self.agent
        return {
            "id": self.id,
            "model": agent.model_name,
            "outputFormat": agent.output_format,
            "description": agent.description,
        }

    def describe(self) -> dict[str, Any]:
        """What ``GET /agents/<id>`` answers: its summary, input schema and skills."""
        if self.remote:
            return {**self._remote_description(), "id": self.id}
        schema = self.agent.input_schema.model_json_schema() if self.agent.input_schema else {}
        return {**self.summary(), "inputSchema": schema, "skills": sorted(self.agent.skills)}

    def _remote_description(self) -> dict[str, Any]:
        # A remote server that does not answer leaves only what the config knows: one remote
        # down must not take the listing of every agent with it.
        try:
            return self.agent.describe()
        except BreadError as exc:
            log.warning("remote agent %s did not describe itself: %s", self.id, exc.message)
            return {
                "model": f"remote:{self.agent.agent_id}",
                "outputFormat": "text",
                "description": None,
                "inputSchema": {},
                "skills": [],
            }


def load_skills(folder: Path) -> dict[str, Skill]:
    """Every ``SKILL.md`` one or two levels below ``folder``, keyed by its front-matter name."""
    skills = {}
    for path in sorted([*folder.glob("*/SKILL.md"), *folder.glob("skills/*/SKILL.md")]):
        meta, body = parse_front_matter(path.read_text(encoding="utf-8"))
        name = meta.get("name") or path.parent.name
        skills[name] = Skill(name, meta.get("description", ""), body.strip())
    return skills


def parse_front_matter(text: str) -> tuple[dict[str, str], str]:
    """``---``-fenced ``key: value`` lines at the top of a markdown file, and the rest."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    try:
        end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() == "---")
    except StopIteration:
        return {}, text
    meta = {}
    for line in lines[1:end]:
        key, sep, value = line.partition(":")
        if sep and key.strip():
            meta[key.strip()] = value.strip().strip("\"'")
    return meta, "\n".join(lines[end + 1 :])


def describe_validation(exc: ValidationError, what: str) -> str:
    problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors())
    return f"{what} is invalid: {problems}"
