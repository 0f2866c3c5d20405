"""``fallback([...])``: the chain of models over the real SDKs, against one local server that
speaks both the Messages API and chat completions (tests/fake_provider.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from bread_sync import Agent
from bread_sync.errors import MODEL_AUTH_FAILED, MODEL_OVERLOADED, MODEL_RATE_LIMITED
from bread_sync.models import anthropic as anthropic_provider
from bread_sync.models import fallback

from .fake_provider import Fail, Stream
from .test_anthropic_provider import error_body, message
from .test_anthropic_provider import text as claude_text
from .test_openai_provider import text as gpt_text

pytest.importorskip("anthropic")
pytest.importorskip("openai")


@pytest.fixture
def endpoints(provider_server, monkeypatch):
    """Both providers' names lead to the one local server."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", provider_server.origin)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-a")
    monkeypatch.setenv("OPENAI_BASE_URL", provider_server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-o")
    return provider_server


def rate_limited(retry_after: str) -> Fail:
    return Fail(429, "", {"retry-after": retry_after}, error_body("rate_limit_error", "slow down"))


def paths(server: Any) -> list[str]:
    return [request["path"] for request in server.requests]


def test_a_rate_limit_before_the_first_token_moves_on_to_the_next_model(endpoints, bread_for):
    endpoints.play(rate_limited("7"), Stream(gpt_text("From ", "GPT.")))
    agent = Agent(id="a", model=fallback(["anthropic:claude-x", "openai:gpt-x"]))

    crumbs = list(bread_for(agent).run("a", "hi"))

    assert crumbs[-1]["type"] == "agent:run:end" and crumbs[-1]["output"] == "From GPT."
    assert paths(endpoints) == ["/v1/messages", "/v1/chat/completions"]  # no retry by the SDK
    assert agent.model_name == "fallback:anthropic:claude-x,openai:gpt-x"


def test_the_run_names_the_model_that_answered(endpoints, bread_for):
    endpoints.play(Fail(503, "busy", {}), message(claude_text("Claude."), input_tokens=4, output_tokens=2))
    agent = Agent(id="a", model=fallback(["openai:gpt-x", "anthropic:claude-x"]))

    crumbs = list(bread_for(agent).run("a", "hi"))

    assert crumbs[-1]["output"] == "Claude."
    assert crumbs[-1]["usage"]["byModel"] == {
        "anthropic:claude-x": {"inputTokens": 4, "outputTokens": 2, "totalTokens": 6}
    }


def test_a_new_round_waits_for_the_retry_after_the_model_asked(endpoints, bread_for):
    endpoints.play(rate_limited("0.4"), message(claude_text("Later.")))
    agent = Agent(id="a", model=fallback(["anthropic:claude-x"], rounds=2, backoff=0.01))

    started = time.monotonic()
    crumbs = list(bread_for(agent).run("a", "hi"))

    assert time.monotonic() - started >= 0.4
    assert crumbs[-1]["output"] == "Later." and len(endpoints.requests) == 2


def test_the_wait_is_bounded_and_the_last_failure_is_the_runs_error(endpoints, bread_for):
    endpoints.play(rate_limited("600"), rate_limited("600"))
    agent = Agent(id="a", model=fallback(["anthropic:claude-x"], rounds=2, max_wait=0.05))

    started = time.monotonic()
    crumbs = list(bread_for(agent).run("a", "hi"))

    assert time.monotonic() - started < 5
    assert crumbs[-1]["type"] == "agent:error" and crumbs[-1]["error"].code == MODEL_RATE_LIMITED
    assert crumbs[-1]["error"].context["retryAfter"] == 600.0
    assert len(endpoints.requests) == 2


def test_a_failure_after_the_first_token_is_the_runs_error(endpoints, bread_for):
    broken = message(claude_text("Hel", "lo"))
    broken.chunks[4:] = [("error", error_body("overloaded_error", "Overloaded"))]
    endpoints.play(broken, Stream(gpt_text("never")))
    agent = Agent(id="a", model=fallback(["anthropic:claude-x", "openai:gpt-x"]))

    crumbs = list(bread_for(agent).run("a", "hi"))

    assert [c["type"] for c in crumbs] == ["agent:run:start", "text:delta", "text:delta", "agent:error"]
    assert crumbs[-1]["error"].code == MODEL_OVERLOADED
    assert paths(endpoints) == ["/v1/messages"]  # no half answer spliced with another model's


def test_a_failure_no_other_model_would_mend_is_not_retried(endpoints, bread_for):
    endpoints.play(Fail(401, "", {}, error_body("authentication_error", "bad key")), Stream(gpt_text("never")))
    agent = Agent(id="a", model=fallback(["anthropic:claude-x", "openai:gpt-x"]))

    crumbs = list(bread_for(agent).run("a", "hi"))

    assert crumbs[-1]["error"].code == MODEL_AUTH_FAILED
    assert paths(endpoints) == ["/v1/messages"]


def test_a_traced_run_says_which_model_answered(endpoints, bread_for):
    otel = pytest.importorskip("bread_sync.tracing.otel")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    endpoints.play(rate_limited("0"), Stream(gpt_text("ok")))
    exporter, spans = InMemorySpanExporter(), TracerProvider()
    spans.add_span_processor(SimpleSpanProcessor(exporter))
    bread = bread_for(Agent(id="a", model=fallback(["anthropic:claude-x", "openai:gpt-x"])))
    bread.tracer = otel.tracer(spans)

    list(bread.run("a", "hi"))

    finished = exporter.get_finished_spans()
    (chat,) = [span for span in finished if span.name.startswith("chat ")]
    assert chat.attributes["gen_ai.response.model"] == "openai:gpt-x"
    (run,) = [span for span in finished if span.attributes.get("bread.usage.models")]
    assert list(run.attributes["bread.usage.models"]) == ["openai:gpt-x"]


def test_a_chain_takes_the_files_every_one_of_its_models_takes():
    images_and_pdf = {"image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"}
    assert fallback(["openai:a", "anthropic:b"]).file_types == images_and_pdf
    narrow = anthropic_provider.provider(model="b", file_types=["image/png"])
    assert fallback(["openai:a", narrow]).file_types == {"image/png"}
    assert fallback(["openai:a", "echo"]).file_types == frozenset()  # echo takes none: nor does the chain
