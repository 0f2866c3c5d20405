"""The client conformance suite (``bread_sync.client.conformance``) run over both built-in
transports: in-process over a ``Bread``, and HTTP against real gunicorn servers of each wire."""

from __future__ import annotations

import pytest

from bread_sync import create_bread
from bread_sync.client import http, local
from bread_sync.demo import config as demo_config

from ..integration import servers

#: Both HTTP wires: the SSE transport and the NDJSON one.
HTTP_TRANSPORTS = ["http-sse", "http-chunked"]


@pytest.fixture(scope="module")
def client_servers(tmp_path_factory):
    pool = servers.ServerPool(tmp_path_factory.mktemp("client-servers"))
    yield pool
    pool.stop_all()


@pytest.fixture(params=["local", *HTTP_TRANSPORTS])
def agent_client_transport(request, tmp_path):
    if request.param == "local":
        bread = create_bread(demo_config().model_copy(update={"store": "memory", "blob_store": "memory"})).start()
        yield local.transport(bread)
        bread.close()
        return
    server = request.getfixturevalue("client_servers").primary(request.param)
    transport = http.transport(server.url)
    yield transport
    transport.close()
