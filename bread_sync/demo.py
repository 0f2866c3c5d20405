"""The demo agents, served by default with no API key: echo, writer, interviewer, slow."""

from __future__ import annotations

from pydantic import BaseModel, Field

from .agents import Agent, ToolContext, input_tool, tool
from .config import Config
from .models import script
from .models.script import call, say


class Topic(BaseModel):
    topic: str


class Post(BaseModel):
    title: str


class Question(BaseModel):
    question: str


class Ticks(BaseModel):
    count: int = Field(ge=0, le=100_000)
    delayMs: int = Field(ge=0, le=60_000)  # noqa: N815 - the wire spelling


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
    description="Drafts a post, then asks before publishing it.",
    model=script.provider([
        lambda convo: say(f"Drafting a post about {convo.input['topic']}."),
        lambda convo: call("publish", {"title": convo.input["topic"]}),
        _after_publish,
    ]),
    tools=[publish],
    input_schema=Topic,
)  # fmt: skip

interviewer = Agent(
    id="interviewer",
    description="Asks for your name, then thanks you.",
    model=script.provider([call("ask_user", {"question": "What is your name?"}), _thanks]),
    tools=[input_tool("ask_user", "Ask the user a question.", Question)],
)

slow = Agent(
    id="slow",
    description="Streams `count` ticks, `delayMs` apart: for cancel and tail tests.",
    model=script.provider([_ticks]),
    input_schema=Ticks,
)


def config() -> Config:
    """A fresh demo config (store and transport resolved from the environment)."""
    return Config(agents=[echo, writer, interviewer, slow])
