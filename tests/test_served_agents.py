"""Which agents an instance serves has one answer, ``Bread.served_agents``: ``GET /agents``,
the in-process client's manifest and the MCP tools all read it, remote agents included."""

from __future__ import annotations

import pytest

from bread_sync.client import create_agent_client, local
from bread_sync.protocols.mcp import mcp_server
from bread_sync.server import create_server
from bread_sync.transports import http_chunked
from tests.integration.servers import free_port


@pytest.fixture
def remote_url(make_bread, serve_in_thread):
    """A server of the demo agents, on a thread of this process."""
    return serve_in_thread(make_bread(transport="http-sse"))


def manifest_ids(bread):
    return [agent["id"] for agent in create_agent_client(local.transport(bread)).manifest()["agents"]]


def listed_over_http(bread):
    return create_server(bread).test_client().get("/agents").json


def test_the_in_process_manifest_lists_a_remote_agent_as_get_agents_does(make_bread, remote_url):
    bread = make_bread(
        transport="http-sse", remote_agents={"far": http_chunked.remote_agent(url=remote_url, agent_id="writer")}
    )
    manifest = create_agent_client(local.transport(bread)).manifest()["agents"]
    writer = next(agent for agent in listed_over_http(make_bread(transport="http-sse")) if agent["id"] == "writer")
    assert manifest[-1] == {**writer, "id": "far"}
    assert manifest == listed_over_http(bread)


def test_a_remote_agent_that_does_not_answer_is_listed_with_what_the_config_knows(make_bread):
    down = http_chunked.remote_agent(url=f"http://127.0.0.1:{free_port()}", agent_id="writer")
    bread = make_bread(transport="http-sse", remote_agents={"far": down})
    far = {"id": "far", "model": "remote:writer", "outputFormat": "text", "description": None}
    assert create_agent_client(local.transport(bread)).manifest()["agents"][-1] == far
    assert listed_over_http(bread)[-1] == far


def test_entrypoints_narrow_every_listing_alike(make_bread, remote_url):
    far = http_chunked.remote_agent(url=remote_url, agent_id="echo")
    mcp = mcp_server()
    served = {"remote_agents": {"far": far, "echo": far}, "entrypoints": ["echo", "far", "writer"], "plugins": [mcp]}
    bread = make_bread(transport="http-sse", **served)
    assert manifest_ids(bread) == ["writer", "far", "echo"]
    assert [agent["id"] for agent in listed_over_http(bread)] == ["writer", "far", "echo"]
    assert [name for name in mcp.tools if name.startswith("agent_")] == ["agent_writer"]  # remote ones aside
