"""The Postgres live channel's own cases beside the transport contract (tests/contract/): what
LISTEN/NOTIFY limits (a payload's size, a transaction's identical payloads) and its health."""

import time

import pytest

from bread_sync.crumbs import Frame

from .waiting import delivered

postgres = pytest.importorskip("bread_sync.transports.postgres")

DELIVERY_SECONDS = 5.0


@pytest.fixture
def pair(postgres_url):
    """A publishing and a listening transport, as two processes have them."""
    publisher, subscriber = postgres.transport(url=postgres_url), postgres.transport(url=postgres_url)
    assert subscriber.flush()
    yield publisher, subscriber
    publisher.close()
    subscriber.close()


def test_every_payload_fits_a_notification():
    text = "é€😀x" * 10_000
    parts = postgres.payloads("origin", 7, text)
    assert len(parts) > 1 and all(len(p.encode()) < 8000 for p in parts)


def test_a_crumb_bigger_than_a_notification_arrives_whole(pair):
    publisher, subscriber = pair
    big = Frame("r", 1, {"type": "tool:result", "runId": "r", "output": "é€😀x" * 10_000})
    got = []
    subscriber.subscribe("r", 0, got.append)
    publisher.publish(big)
    publisher.publish(Frame("r", 2, {"type": "tool:call", "runId": "r"}))
    assert delivered(got, 2, DELIVERY_SECONDS) == [big, Frame("r", 2, {"type": "tool:call", "runId": "r"})]


def test_identical_deltas_sent_in_one_batch_each_arrive(pair):
    publisher, subscriber = pair
    got = []
    subscriber.subscribe("r", 0, got.append)
    for _ in range(50):
        publisher.publish(Frame("r", 1, {"type": "text:delta", "runId": "r", "delta": "ha"}))
    assert publisher.flush() and subscriber.flush()
    assert [f.crumb["delta"] for f in delivered(got, 50, DELIVERY_SECONDS)] == ["ha"] * 50


def test_it_is_healthy_only_while_it_listens(postgres_url):
    transport = postgres.transport(url=postgres_url)
    try:
        assert not transport.healthy  # nothing heard yet: tails read the store
        assert transport.flush()
        assert transport.healthy
    finally:
        transport.close()


def test_an_unreachable_postgres_makes_it_unhealthy_and_publishing_does_not_block():
    transport = postgres.transport(url="postgresql://nobody@127.0.0.1:1/none")
    try:
        started = time.monotonic()
        for seq in range(1, 101):
            transport.publish(Frame("r", seq, {"type": "tool:call", "runId": "r"}))
        assert time.monotonic() - started < 1.0
        assert not transport.flush(timeout=0.5)
        assert not transport.healthy
    finally:
        transport.close()


def test_a_cancel_reaches_every_process(pair):
    publisher, subscriber = pair
    heard, mine = [], []
    subscriber.on_cancel(heard.append)
    undo = publisher.on_cancel(mine.append)
    assert publisher.flush()
    assert publisher.request_cancel("r-1")
    assert delivered(heard, 1, DELIVERY_SECONDS) == ["r-1"] and delivered(mine, 1, DELIVERY_SECONDS) == ["r-1"]
    undo()
    publisher.request_cancel("r-2")
    assert publisher.flush() and subscriber.flush()
    assert delivered(heard, 2, DELIVERY_SECONDS) == ["r-1", "r-2"] and mine == ["r-1"]
