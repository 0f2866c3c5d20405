"""The official OpenAI clients, unchanged, against a real gunicorn gevent server's OpenAI routes:
the ``openai`` Python package and npm's ``openai`` (installed into tests/node/ by the
``node_clients`` fixture, version pinned in its package.json). Chat completions and responses,
streaming and not, an error, a malformed body, and a paused agent answered by the next message
on its session or on the native resume route. The clients send the server's API key as a bearer."""

from __future__ import annotations

import json
import subprocess

import openai
import pytest

from .openai_config import KEY

CONFIG = "tests.integration.openai_config:config"


@pytest.fixture
def server(pool):
    return pool.primary("http-sse", CONFIG)


@pytest.fixture
def client(server):
    with openai.OpenAI(api_key=KEY, base_url=f"{server.url}/v1", max_retries=0, timeout=30) as made:
        yield made


def ask(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_the_python_client_lists_the_agents_as_models(client):
    assert {"echo", "writer", "broken"} <= {model.id for model in client.models.list()}
    assert client.models.retrieve("slow").owned_by == "bread_sync"


def test_the_python_client_reads_chat_completions_streaming_and_not(client):
    raw = client.chat.completions.with_raw_response.create(model="echo", messages=ask("hello there"))
    completion = raw.parse()
    assert completion.choices[0].message.content == "hello there"
    assert completion.bread["runId"] == raw.headers["Bread-Run-Id"] and completion.bread["status"] == "completed"
    chunks = list(
        client.chat.completions.create(
            model="echo", messages=ask("one two three"), stream=True, stream_options={"include_usage": True}
        )
    )
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices) == "one two three"
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "stop"
    assert chunks[-1].choices == []  # the usage chunk: null, or the run's where its model reports one
    assert chunks[-1].usage is None or chunks[-1].usage.total_tokens >= 0


def test_the_python_client_reads_responses_streaming_and_not(client):
    response = client.responses.create(model="echo", input="a response", instructions="Be brief.")
    assert (response.output_text, response.status, response.instructions) == ("a response", "completed", "Be brief.")
    events = list(client.responses.create(model="echo", input="a streamed response", stream=True))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "a streamed response"
    assert events[-1].response.output_text == "a streamed response"


def test_reasoning_reaches_the_python_client_live_and_the_log_whole(client, server, http):
    chunks = list(client.chat.completions.create(model="thinker", messages=ask("two and two?"), stream=True))
    deltas = [chunk.choices[0].delta for chunk in chunks if chunk.choices]
    thought = "".join((delta.model_extra or {}).get("reasoning_content") or "" for delta in deltas)
    assert thought == "Two and two. Makes four. " and "".join(d.content or "" for d in deltas) == "Four."
    events = list(client.responses.create(model="thinker", input="two and two?", stream=True))
    assert "".join(e.delta for e in events if e.type == "response.reasoning_text.delta") == thought
    final = events[-1].response
    assert [item.type for item in final.output] == ["reasoning", "message"] and final.output_text == "Four."
    assert final.output[0].content[0].text == thought
    # the native route streams reasoning:delta crumbs; the log keeps them aggregated, apart from the text
    headers = {"Authorization": f"Bearer {KEY}"}
    streamed = http.post(f"{server.url}/agents/thinker/run", json={"input": "x"}, headers=headers)
    live = [json.loads(line[6:])["payload"] for line in streamed.text.splitlines() if line.startswith("data: ")]
    assert "".join(c["delta"] for c in live if c["type"] == "reasoning:delta") == thought
    replayed = http.get(f"{server.url}/runs/{streamed.headers['Bread-Run-Id']}/stream", headers=headers)
    logged = [json.loads(line[6:])["payload"] for line in replayed.text.splitlines() if line.startswith("data: ")]
    kinds = [(c["type"], c["delta"]) for c in logged if c["type"].endswith(":delta")]
    assert kinds == [("reasoning:delta", thought), ("text:delta", "Four.")]


def test_the_python_client_raises_bread_s_error_once(client, server, http):
    with pytest.raises(openai.InternalServerError) as caught:
        client.with_options(max_retries=2).chat.completions.create(model="broken", messages=ask("x"))
    assert (caught.value.code, caught.value.type) == ("MODEL_ERROR", "server_error")
    assert caught.value.message.endswith("the model is down")
    run_id = caught.value.response.headers["Bread-Run-Id"]
    session = caught.value.response.headers["Bread-Session-Id"]
    runs = http.get(f"{server.url}/runs", params={"session": session}, headers={"Authorization": f"Bearer {KEY}"})
    assert [run["id"] for run in runs.json()] == [run_id]  # x-should-retry: false held the client back
    with pytest.raises(openai.APIError) as caught:
        list(client.chat.completions.create(model="broken", messages=ask("x"), stream=True))
    assert caught.value.code == "MODEL_ERROR"
    events = list(client.responses.create(model="broken", input="x", stream=True))
    assert [e.type for e in events[-2:]] == ["error", "response.failed"] and events[-2].code == "MODEL_ERROR"


def test_the_python_client_is_told_what_is_malformed_before_any_run(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="echo", messages=[])
    assert (caught.value.code, caught.value.param) == ("INVALID_REQUEST", "messages")
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="no-such-agent", input="x")
    assert (caught.value.code, caught.value.param) == ("AGENT_NOT_FOUND", "model")
    assert "Bread-Run-Id" not in caught.value.response.headers
    with pytest.raises(openai.AuthenticationError):
        client.with_options(api_key="not-the-key").models.list()


def test_a_paused_agent_is_answered_by_the_next_message_on_its_session_or_the_resume_route(client, server, http):
    paused = client.chat.completions.create(model="writer", messages=ask("rye"))
    assert paused.choices[0].message.content.endswith("\n\nApprove the call of publish? Answer yes or no.")
    assert paused.bread["status"] == "paused" and paused.bread["checkpoint"]["kind"] == "approval"
    session = {"Bread-Session-Id": paused.bread["sessionId"]}
    resumed = client.responses.create(model="writer", input="yes", extra_headers=session)
    assert resumed.output_text == "Published." and resumed.bread["runId"] == paused.bread["runId"]
    events = list(client.responses.create(model="interviewer", input="hello", stream=True))
    asked = events[-1].response
    checkpoint = asked.bread["checkpoint"]
    assert (events[-1].type, asked.output_text, checkpoint["kind"]) == ("response.completed", "What is your name?",
                                                                        "input")  # fmt: skip
    answered = http.post(f"{server.url}/resume/{checkpoint['id']}", json={"response": {"answer": "Ada"}},
                         headers={"Authorization": f"Bearer {KEY}"})  # fmt: skip
    assert answered.status_code == 200 and "Thanks, Ada." in answered.text


def test_the_npm_client_reads_every_answer(node_clients, server):
    done = subprocess.run(["node", "run_openai.mjs", server.url, KEY], cwd=node_clients, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert {"echo", "writer", "broken"} <= set(seen["models"])
    assert seen["chat"]["text"] == "hello there" and seen["chat"]["bread"]["runId"] == seen["chat"]["runId"]
    stream = seen["chatStream"]
    assert (stream["text"], stream["finish"]) == ("one two three", ["stop"])
    assert stream["last"]["choices"] == [] and "usage" in stream["last"]
    assert seen["responses"] == {"text": "a response", "status": "completed"}
    assert seen["responsesStream"]["text"] == seen["responsesStream"]["streamed"] == "a streamed response"
    assert seen["responsesStream"]["types"][:2] == ["response.created", "response.in_progress"]
    assert seen["responsesStream"]["types"][-1] == "response.completed"
    error = seen["error"]
    assert (error["name"], error["status"], error["code"], error["type"]) == (
        "InternalServerError", 500, "MODEL_ERROR", "server_error"
    )  # fmt: skip
    assert seen["invalid"] == {"status": 400, "code": "INVALID_REQUEST", "param": "messages"}
    paused = seen["paused"]
    assert paused["bread"]["status"] == "paused" and paused["bread"]["checkpoint"]["toolName"] == "publish"
    assert paused["text"].endswith("Answer yes or no.") and paused["resumed"] == "Published."
