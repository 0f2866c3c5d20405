"""The demo, served by default with no API key.

Agents echo, writer, interviewer, slow, counter (a loop), manager (a subagent and a task as
tools), artist (a generated file) and word-counter (a tool of the demo's own MCP server, when the
``mcp`` extra is installed); the pipeline draft-then-echo; the task word-count; the
AG-UI routes (``/ag-ui/run`` for echo, ``/ag-ui/<agentId>`` for the others) when the ``ag-ui``
extra is installed, the MCP server at ``/mcp`` when the ``mcp`` extra is, the A2A endpoints of
echo and slow when the ``a2a`` extra is, and the OpenAI-compatible routes (``/v1``, every agent a
model), which need no extra.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
from typing import Any, ClassVar

from pydantic import BaseModel, Field, model_validator

from .agents import Agent, ToolContext, input_tool, subagent, task_tool, tool
from .config import Config
from .loops import Loop
from .models import script
from .models.script import call, file, say
from .pipelines import Pipeline, Step
from .tasks import Task

#: A 1x1 orange PNG, what the artist "draws".
DOT_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4v5QBAARLAaU/Dnq2AAAAAElFTkSuQmCC"
)


class OrText(BaseModel):
    """An input that may also be a plain text, as protocol clients (AG-UI, A2A, MCP) mostly send:
    ``from_text`` turns the text into the model's fields, and the JSON Schema offers both."""

    text_means: ClassVar[str] = ""

    @classmethod
    def from_text(cls, text: str) -> dict[str, Any]:
        raise NotImplementedError

    @model_validator(mode="before")
    @classmethod
    def _text(cls, data: Any) -> Any:
        return cls.from_text(data) if isinstance(data, str) else data

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        schema = handler.resolve_ref_schema(handler(core_schema))
        return {"anyOf": [{"type": "string", "description": cls.text_means}, schema]}


class Topic(OrText):
    text_means: ClassVar[str] = "the topic"
    topic: str

    @classmethod
    def from_text(cls, text: str) -> dict[str, Any]:
        return {"topic": text}


class Post(BaseModel):
    title: str


class Question(BaseModel):
    question: str


class Answer(BaseModel):
    answer: str


#: The slow agent's tick spacing when its input names none (and for a plain text).
DEFAULT_DELAY_MS = 100


class Ticks(OrText):
    text_means: ClassVar[str] = "a text whose first integer is the count, ticks 100 ms apart"
    count: int = Field(ge=0, le=100_000)
    delayMs: int = Field(DEFAULT_DELAY_MS, ge=0, le=60_000)  # noqa: N815 - the wire spelling

    @classmethod
    def from_text(cls, text: str) -> dict[str, Any]:
        return {"count": _first_integer(text, "the tick count"), "delayMs": DEFAULT_DELAY_MS}


def _first_integer(text: str, meaning: str) -> int:
    found = re.search(r"[0-9]+", text)
    if found is None:
        raise ValueError(f"a text input needs an integer in it: {meaning}")
    return int(found.group())


@tool(ask=True)
def publish(post: Post, ctx: ToolContext) -> dict:
    """Publish the post with this title."""
    return {"published": True, "title": post.title}


def _after_publish(convo: script.Conversation) -> say:
    return say("Published." if convo.last_tool_ok else "Not published.")


def _thanks(convo: script.Conversation) -> say:
    answer = convo.last_tool_output
    name = answer.get("answer") if isinstance(answer, dict) else answer
    return say(f"Thanks, {name}.")


def _ticks(convo: script.Conversation) -> say:
    count, delay_ms = convo.input["count"], convo.input["delayMs"]
    return say([f"tick {n} " for n in range(1, count + 1)], delay=delay_ms / 1000)


echo = Agent(id="echo", model="echo", description="Streams your input back, word by word.")

writer = Agent(
    id="writer",
    description="Drafts a post about a topic (or a text), then asks before publishing it.",
    model=script.provider(
        [
            lambda convo: say(f"Drafting a post about {convo.input['topic']}."),
            lambda convo: call("publish", {"title": convo.input["topic"]}),
            _after_publish,
        ]
    ),
    tools=[publish],
    input_schema=Topic,
)

interviewer = Agent(
    id="interviewer",
    description="Asks for your name, then thanks you.",
    model=script.provider([call("ask_user", {"question": "What is your name?"}), _thanks]),
    # The answer: a name, or {"answer": name}.
    tools=[input_tool("ask_user", "Ask the user a question.", Question, response_schema=str | Answer)],
)

slow = Agent(
    id="slow",
    description="Streams `count` ticks, `delayMs` apart (100 by default; or as many as a text's first integer).",
    model=script.provider([_ticks]),
    input_schema=Ticks,
)


class Until(OrText):
    text_means: ClassVar[str] = "a text whose first integer is `until`"
    until: int = Field(ge=1, le=1000)

    @classmethod
    def from_text(cls, text: str) -> dict[str, Any]:
        return {"until": _first_integer(text, "until")}


class Text(BaseModel):
    text: str


class WordCount(BaseModel):
    words: int


counter = Agent(
    id="counter",
    description="Counts from 1 to `until`, one loop iteration per number (at most 10).",
    model=script.provider([lambda convo: say(str(convo.input["iteration"]))]),
    input_schema=Until,
    loop=Loop(max_iterations=10, until=lambda output, iteration, data: iteration >= data["until"]),
)

word_count = Task(
    id="word-count",
    description="Counts the words of a text.",
    input_schema=Text,
    output_schema=WordCount,
    model=script.provider([lambda convo: say(json.dumps({"words": len(convo.input["text"].split())}))]),
)

MANAGER_TEXT = "hello from the manager"

manager = Agent(
    id="manager",
    description="Asks the echo agent to repeat a line, then counts its words with a task.",
    model=script.provider(
        [
            call("echo", {"input": MANAGER_TEXT}),
            lambda convo: call("word-count", {"text": convo.last_tool_output}),
            lambda convo: say(f"Echo said it back; it has {convo.last_tool_output['words']} words."),
        ]
    ),
    tools=[subagent("echo"), task_tool("word-count")],
)

artist = Agent(
    id="artist",
    description="Draws a small picture (a PNG, through file:generated).",
    model=script.provider([file(DOT_PNG, "image/png", "dot.png"), say("Here is a dot.")]),
)

draft_then_echo = Pipeline(
    id="draft-then-echo",
    description="The writer drafts (and asks before publishing), then echo repeats its output.",
    steps=[Step(agent="writer"), Step(agent="echo")],
)


AGENTS = [echo, writer, interviewer, slow, counter, manager, artist]

#: Where the word-counter agent finds the demo's own MCP endpoint when BREAD_DEMO_MCP_URL names none
#: (``bread-sync start`` and ``dev`` set it to the address they listen on).
DEFAULT_MCP_URL = "http://127.0.0.1:3000/mcp"


def _counted(convo: script.Conversation) -> say:
    if not convo.last_tool_ok:
        return say("The MCP server did not count them.")
    return say(f"{convo.last_tool_output['words']} words.")


def mcp_agents() -> list[Agent]:
    """word-counter: a text's words counted by the ``task_word-count`` tool of the demo's own MCP
    server (``BREAD_DEMO_MCP_URL``, default the address ``bread-sync start`` serves), through
    ``mcp_tools``: a remote MCP tool is an ordinary tool, so no outside server is needed to try
    it. Not among the tools that server lists itself (an agent would call itself)."""
    if importlib.util.find_spec("mcp_types") is None:
        return []
    from .protocols.mcp import mcp_tools

    counting = mcp_tools(os.environ.get("BREAD_DEMO_MCP_URL", DEFAULT_MCP_URL), allow=["task_word-count"])
    model = script.provider([lambda convo: call("task_word-count", {"text": str(convo.input)}), _counted])
    description = "Counts a text's words with the demo's own MCP server's task_word-count tool (mcp_tools)."
    return [Agent(id="word-counter", description=description, model=model, tools=[counting])]


def bridges(agents: list[Agent]) -> list:
    """The protocol bridges the demo mounts for ``agents``: those whose extra is installed (a plain
    install serves the demo without them). AG-UI: ``POST /ag-ui/run`` runs echo, ``POST
    /ag-ui/<agentId>`` every other agent. MCP: ``/mcp``, every agent but word-counter (which calls
    it) and the task as tools. A2A: echo and slow, each in
    v0.3 and v1.0. OpenAI: ``/v1``, every agent as a model. AI SDK: ``/ai-sdk/<agentId>``, every
    agent (see docs/http.md). These paths are fixed: other projects' clients find them there."""
    return [*ag_ui_bridges(agents), *mcp_bridges(), *a2a_bridges(), openai_bridge(), *ai_sdk_bridges(agents)]


def ag_ui_bridges(agents: list[Agent]) -> list:
    if importlib.util.find_spec("ag_ui") is None:
        return []
    from .protocols.ag_ui import ag_ui

    others = [ag_ui(agent_id=agent.id, path=f"/ag-ui/{agent.id}") for agent in agents if agent is not echo]
    return [ag_ui(agent_id="echo"), *others]


def mcp_bridges() -> list:
    if importlib.util.find_spec("mcp_types") is None:
        return []
    from .protocols.mcp import mcp_server

    return [mcp_server(agents=AGENTS, tasks=[word_count])]


def a2a_bridges() -> list:
    """A2A: echo and slow (which a client can cancel or resubscribe to mid-task), each in v0.3
    and v1.0, at fixed paths (see docs/http.md)."""
    if importlib.util.find_spec("a2a") is None:
        return []
    from .protocols.a2a import a2a_server

    mounts = [
        ("echo", "", "/a2a", "0.3"),
        ("echo", "-v1", "/a2a-v1", "1.0"),
        ("slow", "-slow", "/a2a/slow", "0.3"),
        ("slow", "-slow-v1", "/a2a/slow-v1", "1.0"),
    ]
    return [
        a2a_server(
            agent,
            card_path=f"/.well-known/agent-card{card}.json",
            rpc_path=rpc,
            spec_version=version,
            push_notifications=True,
        )
        for agent, card, rpc, version in mounts
    ]


def openai_bridge() -> Any:
    from .protocols.openai_api import openai_api

    return openai_api()


def ai_sdk_bridges(agents: list[Agent]) -> list:
    from .protocols.ai_sdk import ai_sdk

    return [ai_sdk(agent.id) for agent in agents]


def config() -> Config:
    """A fresh demo config (store and transport resolved from the environment)."""
    agents = [*AGENTS, *mcp_agents()]
    return Config(
        agents=agents,
        tasks=[word_count],
        pipelines=[draft_then_echo],
        plugins=bridges(agents),
    )
