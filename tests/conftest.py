import pytest

from bread_sync import Config, ServerSettings, create_bread
from bread_sync.demo import config as demo_config
from bread_sync.transports import stream


@pytest.fixture(autouse=True)
def _isolated_instance(tmp_path, monkeypatch):
    """No test writes into the repository's instance folder or reads the developer's env."""
    monkeypatch.setenv("BREAD_INSTANCE", str(tmp_path / "instance"))
    for name in ("BREAD_DB", "BREAD_CONFIG", "BREAD_TRANSPORT"):
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
