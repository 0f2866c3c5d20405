"""Files as input in process (issue 31 item 4): ``POST /files`` (its action, its own body limit,
its type check, its owner), file references in a run's input (only this server's files, only the
caller's, only types the model takes: refused before the model is called), the user message that
carries them, and the A2A bridge's file parts as the same references."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from typing import Literal

import pytest
from pydantic import BaseModel

from bread_sync import Agent
from bread_sync.agents import subagent, task_tool
from bread_sync.blobs.memory import MemoryBlobStore
from bread_sync.client.local import LocalClientTransport
from bread_sync.errors import FILE_NOT_ACCEPTED, FILE_NOT_FOUND, INPUT_INVALID, BreadError
from bread_sync.files import check_handed_down, for_model_call, user_message
from bread_sync.models import openai as openai_provider
from bread_sync.models import script
from bread_sync.models.script import call, say
from bread_sync.protocols.a2a import a2a_server
from bread_sync.server import auth_plugin, create_server
from bread_sync.transports import http_chunked

from .contract.test_blob_store import PutGetOnly
from .fake_provider import Stream
from .files_input import PNG, b64, file_ref, picture_input
from .integration.servers import free_port
from .test_openai_provider import text

pytest.importorskip("openai")

ALICE, BOB = "alice-key-0123456789", "bob-key-0123456789"
AS_ALICE, AS_BOB = {"Authorization": f"Bearer {ALICE}"}, {"Authorization": f"Bearer {BOB}"}
ASYNC = {"Prefer": "respond-async"}


def looking(provider_server, **opts):
    """An agent whose model takes images: the OpenAI provider on the local fake server."""
    model = openai_provider.provider(model="m", base_url=provider_server.url, api_key="k", **opts)
    return Agent(id="looker", model=model)


def server(make_bread, provider_server, auth=True, plugins=(), agents=(), **settings):
    """The demo agents, ``looker`` and ``agents``, with alice and bob as callers allowed
    everything (auth on)."""
    from bread_sync.demo import config as demo_config

    config = demo_config()
    agents = [*config.agents, looking(provider_server), *agents]
    plugins = [*((auth_plugin(api_keys={"alice": ALICE, "bob": BOB}, env_var=None),) if auth else ()), *plugins]
    settings.setdefault("authorize", lambda identity, action, args: True)
    bread = make_bread(config.model_copy(update={"agents": agents}), transport="http-sse", plugins=plugins,
                       server=settings)  # fmt: skip
    return bread, create_server(bread).test_client()


@pytest.fixture
def api(make_bread, provider_server):
    return server(make_bread, provider_server)


def upload(client, data=PNG, mime_type="image/png", headers=AS_ALICE, query=""):
    return client.post(f"/files{query}", data=data, headers={"Content-Type": mime_type, **headers})


def reference(answer) -> dict:
    body = answer.get_json()
    return {"type": "file", "uri": body["uri"], "mimeType": body["mimeType"]}


def error_of(answer) -> tuple[int, str]:
    return answer.status_code, answer.get_json()["error"]["code"]


# -- the route ---------------------------------------------------------------------------------


def test_an_upload_is_stored_and_answered_201_with_its_reference(api):
    _, client = api
    answer = upload(client, query="?name=cat.png")

    assert answer.status_code == 201
    body = answer.get_json()
    assert body == {"id": body["id"], "uri": f"/files/{body['id']}", "mimeType": "image/png", "size": len(PNG)}
    served = client.get(body["uri"], headers=AS_ALICE)
    assert served.data == PNG and served.headers["Content-Disposition"] == "inline; filename*=UTF-8''cat.png"


@pytest.mark.parametrize("mime_type", ["", "text", "image/png; x", "image/png;", "/png"])
def test_a_content_type_that_is_not_a_media_type_is_refused_and_nothing_stored(api, mime_type):
    bread, client = api
    stored = bread.blob_store.purge  # files kept in a folder: count them before and after
    assert error_of(upload(client, mime_type=mime_type)) == (400, "INVALID_REQUEST")
    assert stored(float("inf"), dry_run=True) == 0


@pytest.mark.parametrize("query", ["?name=", "?name=a%0Ab", "?name=" + "n" * 256])
def test_an_empty_body_or_a_bad_name_is_400(api, query):
    _, client = api
    assert error_of(upload(client, data=b"")) == (400, "INVALID_REQUEST")
    assert error_of(upload(client, query=query)) == (400, "INVALID_REQUEST")


def test_the_route_is_the_file_write_action_with_the_name_as_its_arg(make_bread, provider_server):
    asked = []

    def authorize(identity, action, args):
        asked.append((identity["sub"], action, args))
        return action != "file.write" or identity["sub"] == "alice"

    _, client = server(make_bread, provider_server, authorize=authorize)
    assert upload(client, query="?name=a.png").status_code == 201
    assert upload(client, headers=AS_BOB).status_code == 403
    assert asked == [("alice", "file.write", {"name": "a.png"}), ("bob", "file.write", {})]
    assert error_of(upload(client, headers={})) == (401, "UNAUTHENTICATED")


def test_the_upload_limit_is_its_own_setting(make_bread, provider_server):
    _, client = server(make_bread, provider_server, auth=False, max_body_bytes=10, max_file_bytes=100)
    assert upload(client, data=b"x" * 100, headers={}).status_code == 201
    assert error_of(upload(client, data=b"x" * 101, headers={})) == (413, "BODY_TOO_LARGE")
    assert client.post("/agents/echo/run", data=b"x" * 50).status_code == 413  # the server's own limit stays


def test_an_anonymous_upload_is_read_no_further_than_max_body_bytes(make_bread, provider_server):
    _, client = server(make_bread, provider_server, max_body_bytes=10, max_file_bytes=10_000)
    body = io.BytesIO(b"x" * 5000)  # where it stands after the request: how much the server read
    headers = {"Content-Type": "image/png", "Content-Length": "5000"}
    answer = client.post("/files", input_stream=body, headers=headers)
    assert error_of(answer) == (401, "UNAUTHENTICATED")
    assert body.tell() <= 11
    assert upload(client, data=b"x" * 5000).status_code == 201  # the caller known, read whole


# -- ownership ---------------------------------------------------------------------------------


def test_another_callers_upload_is_not_found_to_read_or_to_reference(api):
    _, client = api
    uri = upload(client).get_json()["uri"]

    assert error_of(client.get(uri, headers=AS_BOB)) == (404, FILE_NOT_FOUND)
    body = {"input": [{"type": "text", "text": "look"}, {"type": "file", "uri": uri, "mimeType": "image/png"}]}
    answer = client.post("/agents/looker/run", json=body, headers={**AS_BOB, **ASYNC})
    assert error_of(answer) == (404, FILE_NOT_FOUND)
    assert client.get(uri, headers=AS_ALICE).status_code == 200


def test_a_generated_file_is_anyones_who_may_read_files(api):
    bread, client = api
    uri = bread.blob_store.put(PNG, "image/png")["url"]  # a model's: no owner
    assert client.get(uri, headers=AS_BOB).data == PNG


# -- references in a run's input ----------------------------------------------------------------


def test_an_uploaded_image_reaches_the_model_in_its_native_form(api, provider_server):
    _, client = api
    provider_server.play(Stream(text("A cat.")))
    ref = reference(upload(client))

    answer = client.post("/agents/looker/run", json={"input": ref}, headers=AS_ALICE)

    assert answer.status_code == 200 and "A cat." in answer.get_data(as_text=True)
    (sent,) = provider_server.requests
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64(PNG)}}
    assert sent["body"]["messages"] == [{"role": "user", "content": [image]}]


@pytest.mark.parametrize("uri", ["https://example.com/cat.png", "/files/../etc/passwd", "file:///etc/passwd", 7])
def test_a_reference_to_anything_but_this_servers_files_is_input_invalid(api, provider_server, uri):
    _, client = api
    body = {"input": {"type": "file", "uri": uri, "mimeType": "image/png"}}
    answer = client.post("/agents/looker/run", json=body, headers={**AS_ALICE, **ASYNC})
    assert error_of(answer) == (400, INPUT_INVALID)
    assert "upload the file first" in answer.get_json()["error"]["message"]
    streamed = client.post("/agents/looker/run", json=body, headers=AS_ALICE).get_data(as_text=True)
    assert INPUT_INVALID in streamed  # a run's start error, in the stream as every one
    assert provider_server.requests == []


def test_a_model_that_takes_no_files_refuses_the_run_before_it_is_called(make_bread, provider_server):
    bread = make_bread(agents=[looking(provider_server, file_types=())])
    with pytest.raises(BreadError) as refused:
        bread.run("looker", picture_input(bread))
    assert refused.value.code == FILE_NOT_ACCEPTED and "openai" in refused.value.message
    demo = make_bread()
    with pytest.raises(BreadError, match="echo does not take image/png"):
        demo.run("echo", file_ref(demo, PNG, "image/png"))
    assert provider_server.requests == []


def test_a_model_that_takes_fewer_types_refuses_the_others(make_bread, provider_server):
    bread = make_bread(agents=[looking(provider_server, file_types=["image/png"])])
    with pytest.raises(BreadError, match="does not take application/pdf") as refused:
        bread.run("looker", picture_input(bread))
    assert refused.value.code == FILE_NOT_ACCEPTED


def test_a_pipelines_input_holds_only_files_the_caller_may_read(make_bread):
    from bread_sync.pipelines import Pipeline, Step

    bread = make_bread(pipelines=[Pipeline(id="p", steps=[Step(agent="echo")])])
    theirs = file_ref(bread, PNG, "image/png", owner="someone else")
    with pytest.raises(BreadError) as refused:
        bread.run_pipeline("p", [theirs], may_read_file=lambda meta: meta["owner"] is None)
    assert refused.value.code == FILE_NOT_FOUND


# -- what the file check reads ------------------------------------------------------------------


class CountingReads(MemoryBlobStore):
    """The memory blob store, recording the url of every file whose bytes are read."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[str] = []

    def get(self, url):
        self.read.append(url)
        return super().get(url)


def test_a_runs_file_check_reads_the_metadata_not_the_bytes(make_bread, provider_server):
    bread = make_bread(agents=[looking(provider_server)], blob_store=CountingReads())
    alices = file_ref(bread, PNG, "image/png", owner="alice")

    with pytest.raises(BreadError) as refused:
        bread.run("looker", [alices], may_read_file=lambda meta: meta["owner"] == "bob")
    assert refused.value.code == FILE_NOT_FOUND and bread.blob_store.read == []

    provider_server.play(Stream(text("A cat.")))
    assert bread.run("looker", [alices], may_read_file=lambda meta: True, mode="sync").status == "completed"
    assert bread.blob_store.read == [alices["uri"]]  # once, for the model call


def test_the_in_process_clients_file_url_reads_the_metadata_not_the_bytes(make_bread):
    bread = make_bread(blob_store=CountingReads())
    stored = bread.blob_store.put(PNG, "image/png")
    client = LocalClientTransport(bread)

    assert client.create_file_url(stored["url"]) == stored["url"]
    assert client.create_file_url("/files/" + "0" * 32) is None
    assert bread.blob_store.read == []


def test_a_users_blob_store_without_meta_is_checked_through_get(make_bread, provider_server):
    bread = make_bread(agents=[looking(provider_server)], blob_store=PutGetOnly(MemoryBlobStore()))
    alices = file_ref(bread, PNG, "image/png", owner="alice")

    with pytest.raises(BreadError) as refused:
        bread.run("looker", [alices], may_read_file=lambda meta: meta["owner"] == "bob")
    assert refused.value.code == FILE_NOT_FOUND

    provider_server.play(Stream(text("A cat.")))
    assert bread.run("looker", [alices], may_read_file=lambda meta: True, mode="sync").status == "completed"


# -- the user message ----------------------------------------------------------------------------


PHOTO = {"type": "file", "uri": "/files/a", "mimeType": "image/png"}


@pytest.mark.parametrize(
    ("value", "content"),
    [
        (PHOTO, ""),
        (["Look", {"type": "text", "text": "at this"}, PHOTO], "Look\nat this"),
        ({"photo": PHOTO, "n": 1}, json.dumps({"photo": PHOTO, "n": 1})),  # not parts: its JSON, as ever
    ],
)
def test_the_user_message_holds_the_files_and_the_text_beside_them(value, content):
    assert user_message(value) == {
        "role": "user",
        "content": content,
        "files": [{"uri": "/files/a", "mimeType": "image/png"}],
    }
    assert user_message("hi") == {"role": "user", "content": "hi"}
    assert user_message({"n": 1}) == {"role": "user", "content": '{"n": 1}'}


def test_a_file_deleted_since_its_message_is_named_in_the_text(make_bread, provider_server):
    bread = make_bread()
    kept, gone = file_ref(bread, PNG, "image/png"), {"uri": "/files/" + "0" * 32, "mimeType": "image/png"}
    history = [{"role": "user", "content": "Look", "files": [kept, gone]}, {"role": "assistant", "content": "ok"}]

    messages, files = for_model_call(history, bread.blob_store, looking(provider_server).model)

    assert messages[0] == {"role": "user", "content": f"Look\n(the file {gone['uri']} is no longer stored)",
                           "files": [kept]}  # fmt: skip
    assert list(files) == [kept["uri"]] and files[kept["uri"]].data == PNG
    assert messages[1] is history[1]


# -- A2A file parts ------------------------------------------------------------------------------


def a2a_send(client, part, headers=AS_ALICE):
    message = {"role": "user", "parts": [part], "messageId": "m", "kind": "message"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    return client.post("/a2a", json=body, headers=headers).get_json()


def test_an_a2a_file_part_is_a_reference_to_this_servers_files(make_bread, provider_server):
    _, client = server(make_bread, provider_server, plugins=[a2a_server("looker")])
    provider_server.play(Stream(text("A cat.")))
    uri = upload(client).get_json()["uri"]

    task = a2a_send(client, {"kind": "file", "file": {"uri": uri, "mimeType": "image/png"}})["result"]

    assert task["status"]["state"] == "completed"
    (sent,) = provider_server.requests
    assert sent["body"]["messages"][0]["content"][0]["image_url"]["url"] == "data:image/png;base64," + b64(PNG)
    by_url = {"kind": "file", "file": {"uri": "https://example.com/cat.png", "mimeType": "image/png"}}
    assert a2a_send(client, by_url)["error"]["code"] == -32602
    assert a2a_send(client, {"kind": "file", "file": {"uri": uri}}, AS_BOB)["error"]["code"] == -32602
    assert len(provider_server.requests) == 1


def test_an_a2a_inline_file_is_its_senders_as_an_upload_is(make_bread, provider_server):
    bread, client = server(make_bread, provider_server, plugins=[a2a_server("looker")])
    provider_server.play(Stream(text("A cat.")))
    inline = {"kind": "file", "file": {"bytes": b64(PNG), "mimeType": "image/png"}}

    task = a2a_send(client, inline)["result"]

    assert task["status"]["state"] == "completed"
    (asked, _) = bread.store.get_session(task["contextId"])["messages"]
    uri = asked["files"][0]["uri"]
    assert client.get(uri, headers=AS_ALICE).data == PNG
    assert error_of(client.get(uri, headers=AS_BOB)) == (404, FILE_NOT_FOUND)
    assert a2a_send(client, {"kind": "file", "file": {"uri": uri}}, AS_BOB)["error"]["code"] == -32602


@pytest.mark.parametrize(
    ("agent_id", "allowed", "code"),
    [
        ("looker", {"a2a.rpc"}, -32602),  # may send messages, may not upload (file.write)
        ("echo", {"a2a.rpc", "file.write"}, -32005),  # may upload; echo's model takes no images
    ],
)
def test_an_a2a_inline_file_a_run_would_be_refused_for_is_refused_before_it_is_stored(
    make_bread, provider_server, agent_id, allowed, code
):
    from bread_sync.demo import config as demo_config

    config = demo_config()
    bread = make_bread(
        config.model_copy(update={"agents": [*config.agents, looking(provider_server)]}),
        transport="http-sse",
        blob_store=MemoryBlobStore(),
        plugins=[auth_plugin(api_keys={"alice": ALICE}, env_var=None), a2a_server(agent_id)],
        server={"authorize": lambda identity, action, args: action in allowed},
    )
    inline = {"kind": "file", "file": {"bytes": b64(PNG), "mimeType": "image/png"}}

    assert a2a_send(create_server(bread).test_client(), inline)["error"]["code"] == code
    assert bread.blob_store._blobs == {} and provider_server.requests == []


def test_an_a2a_inline_file_s_media_type_is_checked_once_and_one_that_is_none_refused(
    make_bread, provider_server, monkeypatch
):
    """Once for the message: before it is stored (the caller's right to, the model's types) and as it is."""
    from bread_sync.protocols.a2a import parts

    checked = []
    is_media_type = parts.is_media_type
    monkeypatch.setattr(parts, "is_media_type", lambda text: checked.append(text) or is_media_type(text))
    bread, client = server(make_bread, provider_server, plugins=[a2a_server("looker")])
    provider_server.play(Stream(text("A cat.")))

    task = a2a_send(client, {"kind": "file", "file": {"bytes": b64(PNG), "mimeType": "image/png"}})["result"]
    assert task["status"]["state"] == "completed" and checked == ["image/png"]
    monkeypatch.setattr(bread.blob_store, "put", lambda *args: pytest.fail("a refused file was stored"))
    refused = a2a_send(client, {"kind": "file", "file": {"bytes": b64(PNG), "mimeType": "text"}})["error"]
    assert refused["code"] == -32602
    assert refused["message"] == "a file part's mimeType must be a media type such as image/png, not 'text'"
    assert checked == ["image/png", "text"]


class Picture(BaseModel):
    picture: dict


@pytest.mark.parametrize("route", ["http", "mcp"])
def test_an_object_input_may_not_reference_another_callers_upload(make_bread, provider_server, route):
    from bread_sync.protocols.mcp import mcp_server

    from .test_mcp import Mcp

    examiner = Agent(id="examiner", model=looking(provider_server).model, input_schema=Picture)
    _, client = server(make_bread, provider_server, plugins=[mcp_server()], agents=[examiner])
    uri = upload(client).get_json()["uri"]
    given = {"picture": {"type": "file", "uri": uri, "mimeType": "image/png"}}

    if route == "http":
        answer = client.post("/agents/examiner/run", json={"input": given}, headers={**AS_BOB, **ASYNC})
        assert error_of(answer) == (404, FILE_NOT_FOUND)
    else:
        session = Mcp(client, headers=AS_BOB)
        session.initialize()
        result = session.call("agent_examiner", given)
        assert result["isError"] is True and result["structuredContent"]["code"] == FILE_NOT_FOUND
    assert provider_server.requests == []  # the model never saw alice's bytes


# -- files a run's model names for its children ----------------------------------------------------


def taking_images(steps) -> script.ScriptProvider:
    """A script model that takes images, as a provider listing ``file_types`` does."""
    model = script.provider(steps)
    model.file_types = frozenset({"image/png"})
    return model


def named_file(given) -> dict:
    """The file reference a model writes from the uri its input names as text."""
    uri = given if isinstance(given, str) else given[0]["text"]
    return {"type": "file", "uri": uri, "mimeType": "image/png"}


def passing_on(provider_server) -> list[Agent]:
    """``passer``, whose model hands the file its input names to the image-reading ``looker``."""
    steps = [lambda convo: call("looker", {"input": named_file(convo.input)}), say("done")]
    return [Agent(id="passer", model=taking_images(steps), tools=[subagent("looker")])]


def test_a_model_cannot_hand_a_subagent_another_callers_upload(make_bread, provider_server):
    _, client = server(make_bread, provider_server, agents=passing_on(provider_server))
    uri = upload(client).get_json()["uri"]

    stolen = client.post("/agents/passer/run", json={"input": uri}, headers=AS_BOB).get_data(as_text=True)

    assert '"type":"tool:error"' in stolen.replace(" ", "") and FILE_NOT_FOUND in stolen
    assert provider_server.requests == []  # alice's bytes never reached a model
    provider_server.play(Stream(text("A cat.")))
    own = [{"type": "text", "text": uri}, {"type": "file", "uri": uri, "mimeType": "image/png"}]
    client.post("/agents/passer/run", json={"input": own}, headers=AS_ALICE).get_data()
    (sent,) = provider_server.requests
    assert sent["body"]["messages"][0]["content"][0]["image_url"]["url"] == "data:image/png;base64," + b64(PNG)


class Pictured(BaseModel):
    picture: dict


class Described(BaseModel):
    text: str


def describing(task_id: str):
    """A task ``task_id`` that describes a picture (``described``: the inputs it was handed),
    and an agent whose model calls it with the file its own input names."""
    from bread_sync.tasks import Task

    described: list[dict] = []

    def describe(convo):
        described.append(convo.input)
        return say(json.dumps({"text": "a cat"}))

    task = Task(id=task_id, input_schema=Pictured, output_schema=Described, model=script.provider([describe]))
    steps = [lambda convo: call(task_id, {"picture": named_file(convo.input)}), say("done")]
    return task, Agent(id="tasker", model=taking_images(steps), tools=[task_tool(task_id)]), described


def handing_alices_file(bread) -> list[str]:
    """The tool errors of a run of a caller who may read no one's file but its own (none),
    whose input names alice's upload."""
    alices = file_ref(bread, PNG, "image/png", owner="alice")
    stolen = bread.run("tasker", alices["uri"], may_read_file=lambda meta: meta["owner"] is None, mode="sync")
    return [f.crumb["error"]["code"] for f in bread.store.get_crumbs(stolen.run_id) if f.type == "tool:error"]


def test_a_model_cannot_hand_a_task_another_callers_upload(make_bread):
    task, tasker, described = describing("describe")
    bread = make_bread(agents=[tasker], tasks=[task])
    assert handing_alices_file(bread) == [FILE_NOT_FOUND] and described == []


class FileField(BaseModel):
    """A file reference whose ``type`` the schema fills in: ``{"uri": ...}`` becomes one."""

    type: Literal["file"] = "file"
    uri: str
    mimeType: str = "image/png"


class FilledPicture(BaseModel):
    picture: FileField


def reading_pictures(provider_server) -> Agent:
    """``reader``: the image-reading model, its input a picture its schema makes a file reference."""
    return replace(looking(provider_server), id="reader", input_schema=FilledPicture)


def test_a_file_reference_a_subagents_schema_makes_is_checked_as_it_reads_it(make_bread, provider_server):
    steps = [lambda convo: call("reader", {"picture": {"uri": convo.input}}), say("done")]
    passer = Agent(id="passer", model=taking_images(steps), tools=[subagent("reader")])
    _, client = server(make_bread, provider_server, agents=[reading_pictures(provider_server), passer])
    uri = upload(client).get_json()["uri"]

    stolen = client.post("/agents/passer/run", json={"input": uri}, headers=AS_BOB).get_data(as_text=True)

    assert '"type":"tool:error"' in stolen.replace(" ", "") and FILE_NOT_FOUND in stolen
    assert provider_server.requests == []  # alice's bytes never reached a model


def test_a_file_reference_a_pipeline_steps_schema_makes_is_checked_where_the_run_enters(make_bread, provider_server):
    from bread_sync.pipelines import Pipeline, Step

    pipeline = Pipeline(id="look", steps=[Step(agent="reader")])
    bread = make_bread(agents=[reading_pictures(provider_server)], pipelines=[pipeline])
    alices = file_ref(bread, PNG, "image/png", owner="alice")
    given = {"picture": {"uri": alices["uri"]}}

    with pytest.raises(BreadError) as refused:
        bread.run_pipeline("look", given, may_read_file=lambda meta: meta["owner"] == "bob")
    assert refused.value.code == FILE_NOT_FOUND and provider_server.requests == []
    provider_server.play(Stream(text("A cat.")))
    own = bread.run_pipeline("look", given, may_read_file=lambda meta: meta["owner"] == "alice", mode="sync")
    assert own.status == "completed" and len(provider_server.requests) == 1


def test_a_remote_subagents_input_is_left_to_the_remote_to_check(make_bread, serve_in_thread, provider_server):
    """A remote agent's input names files of its own server, which checks them against its
    caller (this server): checked here, a file of the remote's would be one this server lacks.
    Each has a blob store of its own, as two hosts do."""
    remote = make_bread(agents=[looking(provider_server)], plugins=[], transport="http-sse", blob_store="memory")
    theirs = file_ref(remote, PNG, "image/png")  # the remote's, anyone's there; not stored here
    far = http_chunked.remote_agent(url=serve_in_thread(remote), agent_id="looker")
    steps = [lambda convo: call("far", {"input": named_file(convo.input)}), say("done")]
    passer = Agent(id="passer", model=taking_images(steps), tools=[subagent("far")])
    bread = make_bread(agents=[passer], remote_agents={"far": far}, blob_store="memory")
    provider_server.play(Stream(text("A cat.")))

    passed = bread.run("passer", theirs["uri"], mode="sync")

    results = [f.crumb for f in bread.store.get_crumbs(passed.run_id) if f.type in ("tool:result", "tool:error")]
    assert [(result["type"], result.get("output")) for result in results] == [("tool:result", "A cat.")]
    (sent,) = provider_server.requests  # the remote's model was handed the remote's file
    assert sent["body"]["messages"][0]["content"][0]["image_url"]["url"] == "data:image/png;base64," + b64(PNG)
    alices_there = file_ref(remote, PNG, "image/png", owner="alice")  # not this server's to read there
    refused = bread.run("passer", alices_there["uri"], mode="sync")
    errors = [f.crumb["error"] for f in bread.store.get_crumbs(refused.run_id) if f.type == "tool:error"]
    assert [error["code"] for error in errors] == [FILE_NOT_FOUND] and len(provider_server.requests) == 1


def test_a_task_named_as_a_remote_agent_is_still_checked_here(make_bread):
    """Only a remote agent's input is left to its server: a task of the same id runs here."""
    task, tasker, described = describing("look")
    far = http_chunked.remote_agent(url=f"http://127.0.0.1:{free_port()}", agent_id="looker")  # never called
    bread = make_bread(agents=[tasker], tasks=[task], remote_agents={"look": far})
    assert handing_alices_file(bread) == [FILE_NOT_FOUND] and described == []


def test_what_a_model_hands_on_is_checked_as_a_callers_input(make_bread):
    bread = make_bread()
    held, theirs = file_ref(bread, PNG, "image/png", owner="a"), file_ref(bread, PNG, "image/png", owner="b")
    check_handed_down({"x": [held]}, bread.blob_store, {held["uri"]})
    check_handed_down(file_ref(bread, PNG, "image/png"), bread.blob_store, set())  # no one's: anyone's
    with pytest.raises(BreadError) as refused:
        check_handed_down([theirs], bread.blob_store, {held["uri"]})
    assert refused.value.code == FILE_NOT_FOUND
    # None of this server's files: no one's bytes to guard (the next model call names them as not stored).
    for elsewhere in ("https://example.com/cat.png", ["/files/x"], "/files/../secret"):
        check_handed_down({"type": "file", "uri": elsewhere}, bread.blob_store, set())
    check_handed_down(theirs, None, set())


def test_a_pipeline_step_cannot_name_a_file_its_input_did_not_hold(make_bread, provider_server):
    from bread_sync.pipelines import Pipeline, Step

    naming = taking_images([lambda convo: say(json.dumps(named_file(convo.input)))])
    namer = Agent(id="namer", model=naming, output="json")
    pipeline = Pipeline(id="p", steps=[Step(agent="namer"), Step(agent="looker")])
    bread = make_bread(agents=[namer, looking(provider_server)], pipelines=[pipeline])
    alices = file_ref(bread, PNG, "image/png", owner="alice")
    bobs_rule = {"may_read_file": lambda meta: meta["owner"] in (None, "bob"), "mode": "sync"}

    stolen = bread.run_pipeline("p", alices["uri"], **bobs_rule)

    assert stolen.status == "failed" and stolen.error.code == FILE_NOT_FOUND
    assert provider_server.requests == []
    provider_server.play(Stream(text("A cat.")))
    own = bread.run_pipeline("p", [{"type": "text", "text": alices["uri"]}, alices], may_read_file=lambda m: True,
                             mode="sync")  # fmt: skip
    assert own.status == "completed" and own.output == "A cat."
    generated = bread.blob_store.put(PNG, "image/png")["url"]  # a model's file is no one's: anyone's
    provider_server.play(Stream(text("A cat.")))
    assert bread.run_pipeline("p", generated, **bobs_rule).status == "completed"


def test_a_loop_iteration_cannot_name_a_file_its_input_did_not_hold(make_bread):
    from bread_sync.loops import Loop

    def naming(convo):  # each iteration names the file the loop's input names as text
        return say(json.dumps({"picture": named_file(convo.input["input"])}))

    looper = Agent(id="looper", model=taking_images([naming]), output="json", loop=Loop(2))
    bread = make_bread(agents=[looper])
    alices = file_ref(bread, PNG, "image/png", owner="alice")

    stolen = bread.run("looper", alices["uri"], may_read_file=lambda meta: meta["owner"] is None, mode="sync")

    assert stolen.status == "failed" and stolen.error.code == FILE_NOT_FOUND
    (loop,) = bread.store.list_loops()
    first, handed = bread.store.get_loop(loop["id"])["iterations"]
    assert (first["index"], first["status"], first["output"]) == (1, "completed", {"picture": alices})
    assert (handed["index"], handed["status"]) == (2, "failed")


def test_a_pipeline_reads_the_files_its_input_entered_with_once(make_bread, monkeypatch):
    """Not once per step: its first step's validation of the input is made again for each."""
    from bread_sync.engine import pipeline_run
    from bread_sync.pipelines import Pipeline, Step

    asked = []
    entering = pipeline_run.entering
    monkeypatch.setattr(pipeline_run, "entering", lambda *args: asked.append(args) or entering(*args))
    bread = make_bread(pipelines=[Pipeline(id="p", steps=[Step(agent="echo"), Step(agent="echo"), Step(agent="echo")])])
    assert bread.run_pipeline("p", "hi", mode="sync").status == "completed"
    assert len(asked) == 1


def test_a_bread_on_the_memory_store_that_stores_no_file_writes_nothing_to_disk(make_bread, tmp_path):
    bread = make_bread(instance_path=tmp_path / "instance")  # the filesystem blob store, by default
    assert [c["type"] for c in bread.run("echo", "hello there")][-1] == "agent:run:end"
    assert not (tmp_path / "instance").exists()
