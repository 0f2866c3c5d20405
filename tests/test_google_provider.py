"""The ``google`` provider: the official ``google-genai`` client against a local server speaking
Gemini's streamGenerateContent SSE wire (tests/fake_provider.py), driven through the runtime."""

from __future__ import annotations

import base64
import sys
import threading
import time
from typing import Any

import pytest

from bread_sync import Agent
from bread_sync.errors import MODEL_AUTH_FAILED, MODEL_OVERLOADED, MODEL_RATE_LIMITED
from bread_sync.models import google as google_provider

from .fake_provider import STALL, Add, Fail, Stream, add, assert_a_cancel_interrupts_a_blocked_read, types
from .files_input import PDF, PNG, b64, picture_input

pytest.importorskip("google.genai")


def chunk(*parts: dict[str, Any], usage: tuple[int, int, int] | None = None) -> dict[str, Any]:
    """One streamed GenerateContentResponse: its parts, and usage (prompt, answer, thoughts) if given."""
    data: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": list(parts)}, "index": 0}]}
    if usage is not None:
        prompt, answer, thoughts = usage
        data["usageMetadata"] = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": answer,
            "thoughtsTokenCount": thoughts,
            "totalTokenCount": prompt + answer + thoughts,
        }
    return data


def answer(*chunks: dict[str, Any]) -> Stream:
    return Stream(list(chunks), end=None)


def call_part(name: str, args: dict[str, Any], call_id: str = "fc_1", signature: bytes = b"sig") -> dict[str, Any]:
    return {
        "functionCall": {"id": call_id, "name": name, "args": args},
        "thoughtSignature": base64.b64encode(signature).decode(),
    }


def google_error(code: int, status: str, text: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": text, "status": status}}


def llm(server: Any, **opts: Any) -> google_provider.GoogleProvider:
    return google_provider.provider(model="m", base_url=server.origin, api_key="gk-test", **opts)


def test_text_streams_with_the_calls_usage(provider_server, bread_for):
    provider_server.play(answer(chunk({"text": "Hel"}), chunk({"text": "lo"}, usage=(7, 2, 0))))
    agent = Agent(id="a", model=llm(provider_server, params={"temperature": 0.3}), prompt="Be brief.")

    crumbs = list(bread_for(agent).run("a", "hi"))

    assert [c["delta"] for c in crumbs if c["type"] == "text:delta"] == ["Hel", "lo"]
    assert crumbs[-1]["output"] == "Hello"
    assert crumbs[-1]["usage"]["byModel"] == {"google:m": {"inputTokens": 7, "outputTokens": 2, "totalTokens": 9}}
    (sent,) = provider_server.requests
    assert "/models/m:streamGenerateContent" in sent["path"]
    assert sent["headers"]["x-goog-api-key"] == "gk-test"
    body = sent["body"]
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert body["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    assert body["generationConfig"]["temperature"] == 0.3


def test_a_function_call_streams_its_input_and_its_response_goes_back(provider_server, bread_for):
    provider_server.play(
        answer(chunk(call_part("add", {"a": 2, "b": 3}), usage=(10, 4, 0))),
        answer(chunk({"text": "It is 5."}, usage=(20, 3, 0))),
    )

    crumbs = list(bread_for(Agent(id="a", model=llm(provider_server), tools=[add])).run("a", "2+3?"))

    assert types(crumbs) == [
        "agent:run:start",
        "tool:input:start",
        "tool:input:delta",
        "tool:input:end",
        "tool:call",
        "tool:result",
        "text:delta",
        "agent:run:end",
    ]
    assert crumbs[2]["delta"] == '{"a": 2, "b": 3}'
    assert crumbs[-1]["output"] == "It is 5." and crumbs[-1]["usage"]["inputTokens"] == 30
    offered, answered = (request["body"] for request in provider_server.requests)
    (declaration,) = offered["tools"][0]["functionDeclarations"]
    # the client library sends these nested keys in snake case, which the API's JSON reading accepts
    assert declaration["name"] == "add" and declaration["parameters_json_schema"] == Add.model_json_schema()
    model_turn, responses = answered["contents"][1:]
    assert model_turn == {
        "role": "model",
        "parts": [
            {
                "functionCall": {"id": "fc_1", "name": "add", "args": {"a": 2, "b": 3}},
                "thoughtSignature": base64.b64encode(b"sig").decode(),  # sent back within its loop
            }
        ],
    }
    assert responses == {
        "role": "user",
        "parts": [{"functionResponse": {"id": "fc_1", "name": "add", "response": {"output": 5}}}],
    }


def test_thoughts_stream_as_reasoning_and_count_as_output(provider_server, bread_for):
    provider_server.play(
        answer(chunk({"text": "Weighing it.", "thought": True}), chunk({"text": "Yes."}, usage=(5, 1, 9)))
    )
    params = {"thinking_config": {"include_thoughts": True}}

    crumbs = list(bread_for(Agent(id="a", model=llm(provider_server, params=params))).run("a", "ok?"))

    assert types(crumbs) == ["agent:run:start", "reasoning:delta", "text:delta", "agent:run:end"]
    assert crumbs[1]["delta"] == "Weighing it." and crumbs[-1]["output"] == "Yes."
    assert crumbs[-1]["usage"]["outputTokens"] == 10
    assert provider_server.requests[0]["body"]["generationConfig"]["thinkingConfig"] == {"include_thoughts": True}


@pytest.mark.parametrize(
    ("status", "name", "code"),
    [
        (429, "RESOURCE_EXHAUSTED", MODEL_RATE_LIMITED),
        (503, "UNAVAILABLE", MODEL_OVERLOADED),
        (403, "PERMISSION_DENIED", MODEL_AUTH_FAILED),
    ],
)
def test_the_providers_errors_become_bread_codes(provider_server, bread_for, status, name, code):
    provider_server.play(Fail(status, "", {"retry-after": "3"}, google_error(status, name, "no luck")))

    crumbs = list(bread_for(Agent(id="a", model=llm(provider_server))).run("a", "hi"))

    error = crumbs[-1]["error"]
    assert (crumbs[-1]["type"], error.code) == ("agent:error", code)
    assert "no luck" in error.message and "gk-test" not in error.message
    assert error.context["status"] == status and error.context["retryAfter"] == 3.0


def test_a_provider_name_reads_the_providers_environment(provider_server, bread_for, monkeypatch):
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", provider_server.origin)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "gk-env")
    provider_server.play(answer(chunk({"text": "hi"})))

    crumbs = list(bread_for(Agent(id="a", model="google:gemini-x")).run("a", "hello"))

    assert crumbs[-1]["output"] == "hi"
    (sent,) = provider_server.requests
    assert "/models/gemini-x:" in sent["path"] and sent["headers"]["x-goog-api-key"] == "gk-env"


def is_reading_the_body(thread_id: int, deadline: float) -> bool:
    """Poll the thread's stack until it reads the stream's body (past its headers) from the
    socket: no event says so."""
    while time.monotonic() < deadline:
        frame, names = sys._current_frames().get(thread_id), set()
        while frame is not None:
            names.add(frame.f_code.co_name)
            frame = frame.f_back
        if {"_iter_response_stream", "read"} <= names:
            return True
        threading.Event().wait(0.005)
    return False


def test_a_cancel_interrupts_a_blocked_read(provider_server, bread_for):
    provider_server.play(answer(chunk({"text": "Hel"}), STALL))
    bread = bread_for(Agent(id="a", model=llm(provider_server, timeout=30)))
    assert_a_cancel_interrupts_a_blocked_read(bread, provider_server, is_reading_the_body)


def test_an_image_and_a_pdf_go_as_inline_data_parts_before_the_text(provider_server, bread_for):
    provider_server.play(answer(chunk({"text": "A cat."})))
    bread = bread_for(Agent(id="a", model=llm(provider_server)))

    crumbs = list(bread.run("a", picture_input(bread)))

    assert crumbs[-1]["output"] == "A cat."
    (sent,) = provider_server.requests
    (content,) = sent["body"]["contents"]
    image, pdf, words = content["parts"]
    # The API reads its JSON field names in either spelling; the client sends the Blob's as it has them.
    assert [inline_blob(image), inline_blob(pdf)] == [("image/png", b64(PNG)), ("application/pdf", b64(PDF))]
    assert content["role"] == "user" and words == {"text": "What is in these?"}


def inline_blob(part: dict[str, Any]) -> tuple[str, str]:
    blob = part["inlineData"]
    return blob.get("mimeType") or blob["mime_type"], blob["data"]
