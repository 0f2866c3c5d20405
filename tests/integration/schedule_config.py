"""The config of the servers and workers of tests/integration/test_queue_order.py
(``BREAD_CONFIG=tests.integration.schedule_config:config``): the fault tests' agents, and a
schedule of ``echo`` every five minutes, whose ticks the test enqueues with their time."""

from __future__ import annotations

from bread_sync.schedules import Schedule

from .fault_config import config as fault_config

EVERY_FIVE_MINUTES = Schedule("echo", "tick tock", cron="*/5 * * * *")


def config():
    return fault_config().model_copy(update={"schedules": [EVERY_FIVE_MINUTES]})
