import os
import threading
import uuid

import pytest

from bread_sync import Config, ServerSettings, create_bread
from bread_sync.demo import config as demo_config
from bread_sync.transports import stream

from . import postgres_server
from .redis_server import RedisServer

pytest_plugins = ["bread_sync.client.conformance"]

#: A Redis the developer or CI provides; read once, before any test clears the environment.
EXTERNAL_REDIS_URL = os.environ.get("REDIS_URL")
#: A Postgres the developer or CI provides (a user who may create databases), read likewise.
EXTERNAL_DATABASE_URL = os.environ.get("DATABASE_URL")


#: The variables that turn tracing on: a test traces only with a tracer of its own.
OTEL_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER")


@pytest.fixture(autouse=True)
def _isolated_instance(tmp_path, monkeypatch):
    """No test writes into the repository's instance folder or reads the developer's env."""
    monkeypatch.setenv("BREAD_INSTANCE", str(tmp_path / "instance"))
    # A developer's BREAD_API_KEYS or BREAD_SECRET would make every server without auth refuse to start.
    unread = ("BREAD_API_KEYS", "BREAD_SECRET")
    for name in ("BREAD_DB", "BREAD_CONFIG", "BREAD_TRANSPORT", "REDIS_URL", *unread, *OTEL_VARIABLES):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def make_bread():
    """Build Breads on the demo agents (memory store unless told otherwise); closed after."""
    made = []

    def make(config: Config | None = None, **updates):
        config = config or demo_config()
        updates.setdefault("store", "memory")
        updates.setdefault("transport", stream.transport())
        if isinstance(updates.get("server"), dict):
            updates["server"] = ServerSettings(**updates["server"])
        bread = create_bread(config.model_copy(update=updates))
        made.append(bread)
        return bread

    yield make
    for bread in made:
        bread.close()


@pytest.fixture
def bread(make_bread):
    return make_bread()


@pytest.fixture
def serve_in_thread():
    """Serve a Bread over real HTTP on 127.0.0.1, on threads of this process (werkzeug's
    threaded server): ``serve(bread, port=0)`` is its base URL (on ``port``, else a free one).
    Shut down when the test ends."""
    from werkzeug.serving import make_server

    from bread_sync.server import create_server

    servers = []

    def serve(bread, port: int = 0) -> str:
        server = make_server("127.0.0.1", port, create_server(bread), threaded=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        servers.append((server, thread))
        return f"http://127.0.0.1:{server.port}"

    yield serve
    for server, thread in servers:
        server.shutdown()
        thread.join()


@pytest.fixture
def provider_server():
    """A local server playing a model provider's wire (tests/fake_provider.py)."""
    from .fake_provider import FakeProvider

    fake = FakeProvider()
    yield fake
    fake.close()


@pytest.fixture
def bread_for():
    """Build a Bread around one agent (memory store); closed after."""
    made = []

    def make(agent):
        bread = create_bread(Config(agents=[agent], store="memory"))
        made.append(bread)
        return bread

    yield make
    for bread in made:
        bread.close()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """A real Redis for the whole session: ``REDIS_URL`` when set, else one started here."""
    if EXTERNAL_REDIS_URL:
        yield EXTERNAL_REDIS_URL
        return
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server.url
    server.stop()


@pytest.fixture
def redis_server(tmp_path):
    """A Redis of this test's own, which it may stop and start again (same port)."""
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


@pytest.fixture
def make_redis_transport(redis_url):
    """Build Redis transports (on the session's Redis unless given a url); closed after."""
    from bread_sync.transports import redis

    made = []

    def make(url=None, **opts):
        transport = redis.transport(url=url or redis_url, **opts)
        made.append(transport)
        return transport

    yield make
    for transport in made:
        transport.close()


@pytest.fixture(scope="session")
def postgres_admin_url():
    """A real Postgres for the whole session: ``DATABASE_URL`` when set, else one started here
    (see tests/postgres_server.py); skipped, saying why, where neither can be had."""
    if EXTERNAL_DATABASE_URL:
        yield EXTERNAL_DATABASE_URL
        return
    reason = postgres_server.unavailable()
    if reason:
        pytest.skip(reason)
    server = postgres_server.PostgresServer().start()
    yield server.url()
    server.remove()


@pytest.fixture
def postgres_url(postgres_admin_url):
    """A new empty database of this test's own on the session's Postgres; dropped after."""
    name = f"bread_{uuid.uuid4().hex[:12]}"
    url = postgres_server.create_database(postgres_admin_url, name)
    yield url
    postgres_server.drop_database(postgres_admin_url, name)
