"""The in-process transport: a ``Bread`` object of this process, called directly. The reference
of the client contract, and the way a program that embeds bread_sync uses the same client code
it would point at a server.

A run it starts is driven on a thread of its own (so a caller that stops reading does not stop
the run, as over HTTP) and read through ``bread.tail``, the same merge of log and transport a
passive stream serves. The tail has a run's last crumb as soon as it is logged, before its
driver has ended the run's span: the stream hands that crumb out only once the driver is done.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from ..crumbs import STREAM_END, Frame
from ..errors import BLOB_STORE_NOT_CONFIGURED, FILE_NOT_FOUND, RUN_NOT_FOUND, BreadError
from .contract import StoredFile, ThreadState, Unsupported, last_turn, not_supported

FILES = "/files/"
#: How long a run's last crumb waits for its driver to be done with it (its span ended, its
#: metrics counted), which takes moments; longer only for a run another process ended while its
#: driver here was still in a call, which finds out at its next crumb.
DRIVER_DONE_SECONDS = 5.0


class LocalRunStream:
    """A run's frames, read from its tail. ``driver``: the thread driving the run here (None:
    another drives it), which its last crumb (its end or pause) waits for, as a
    :class:`~bread_sync.runs.Run` hands out its own: a caller may stop there and close the
    ``Bread`` (the CLI does, and exits), its span exported by then, not ended after."""

    def __init__(self, run_id: str, frames: Iterator[Any], driver: threading.Thread | None = None):
        self.run_id = run_id
        self._frames = frames
        self._driver = driver

    def __iter__(self) -> Iterator[Any]:
        if self._driver is None:
            return (item for item in self._frames if item is not None)
        return self._driven(self._driver)

    def _driven(self, driver: threading.Thread) -> Iterator[Any]:
        for item in self._frames:
            if isinstance(item, Frame) and item.crumb["type"] in STREAM_END:
                driver.join(DRIVER_DONE_SECONDS)
            if item is not None:
                yield item

    def close(self) -> None:
        self._frames.close()


class LocalClientTransport(Unsupported):
    def __init__(self, bread: Any):
        self.bread = bread

    def get_manifest(self) -> dict[str, Any]:
        return {"agents": [served.summary() for served in self.bread.served_agents()]}

    def list_threads(self, tags: dict[str, str] | None = None) -> list[dict[str, Any]]:
        return self.bread.store.list_sessions(tags or {})

    def delete_thread(self, thread_id: str) -> None:
        self.bread.store.delete_session(thread_id)

    def get_thread_state(self, thread_id: str) -> ThreadState | None:
        session = self.bread.store.get_session(thread_id)
        runs = sorted(self.bread.store.list_runs(session=thread_id), key=lambda r: r["createdAt"])
        if session is None and not runs:
            return None
        return ThreadState(thread_id, session, runs)

    def send(
        self, thread_id: str, agent_id: str, input: Any, *, run_id: str | None = None, skill: str | None = None
    ) -> LocalRunStream:
        run = self.bread.run(agent_id, input, session={"id": thread_id}, skill=skill, run_id=run_id)
        return self._drive(run, 0)

    def send_background(
        self,
        thread_id: str,
        agent_id: str,
        input: Any,
        *,
        run_id: str | None = None,
        skill: str | None = None,
        webhook: dict[str, Any] | None = None,
    ) -> str:
        """Start a run driven on a thread of its own, read by nothing; its id. A webhook needs
        the server (its sender and the address rule)."""
        if webhook is not None:
            raise not_supported("a webhook", "the in-process transport has no webhook sender: use the server")
        run = self.bread.run(agent_id, input, session={"id": thread_id}, skill=skill, run_id=run_id)
        _start(run)
        return run.run_id

    def wait_run(self, run_id: str, timeout: float) -> dict[str, Any]:
        report = self.bread.wait(run_id, timeout)
        if report is None:
            raise BreadError(RUN_NOT_FOUND, f"no run {run_id}")
        return report

    def regenerate(self, thread_id: str, *, run_id: str | None = None) -> LocalRunStream:
        agent_id, input = last_turn(self, thread_id)
        return self.send(thread_id, agent_id, input, run_id=run_id)

    def respond_to_action(self, checkpoint_id: str, response: Any) -> LocalRunStream:
        run = self.bread.resume(checkpoint_id, response)
        return self._drive(run, run.first_seq - 1)

    def _drive(self, run: Any, after: int) -> LocalRunStream:
        driver = _start(run)
        return LocalRunStream(run.run_id, self.bread.tail(run.run_id, after, through_pause=False), driver)

    def stop_thread(self, thread_id: str) -> bool:
        state = self.get_thread_state(thread_id)
        active = state.active_run if state else None
        return active is not None and self.stop_run(active["id"])

    def stop_run(self, run_id: str) -> bool:
        return self.bread.cancel(run_id)

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        record = self.bread.store.get_run(run_id)
        if record is None:
            return None
        checkpoint = self.bread.store.get_checkpoint(record["checkpointId"]) if record["checkpointId"] else None
        keys = ("id", "kind", "toolName", "toolCallId", "input", "createdAt")
        return {**record, "checkpoint": {k: checkpoint[k] for k in keys} if checkpoint else None}

    def stream_run(self, run_id: str, after: int = 0) -> LocalRunStream:
        return LocalRunStream(run_id, self.bread.tail(run_id, after))

    def create_file_url(self, file_id: str) -> str | None:
        url = _url(file_id)
        return url if self.bread.file_meta(url) is not None else None

    def upload_file(self, data: bytes, mime_type: str, name: str | None = None) -> dict[str, Any]:
        stored = self._blobs().put(data, mime_type, name)
        uri = stored["url"]
        return {"id": uri.removeprefix(FILES), "uri": uri, "mimeType": mime_type, "size": stored["size"]}

    def read_file(self, file_id: str) -> StoredFile:
        found = self._blobs().get(_url(file_id))
        if found is None:
            raise BreadError(FILE_NOT_FOUND, f"no file {file_id}")
        data, meta = found
        return StoredFile(data, meta["mimeType"], meta.get("name"))

    def _blobs(self) -> Any:
        if self.bread.blob_store is None:
            raise BreadError(BLOB_STORE_NOT_CONFIGURED, "no blob store is configured")
        return self.bread.blob_store

    def close(self) -> None:
        """Nothing to release: the ``Bread`` is its owner's to close."""


def _start(run: Any) -> threading.Thread | None:
    """The thread driving ``run``, started; None for an attached run (a retried run id), which
    whoever started it drives."""
    if run.attached:
        return None
    driver = threading.Thread(target=run.drain, name=f"run {run.run_id}", daemon=True)
    driver.start()
    return driver


def _url(file_id: str) -> str:
    return file_id if file_id.startswith(FILES) else FILES + file_id


def transport(bread: Any) -> LocalClientTransport:
    """The in-process transport over ``bread`` (a started :class:`~bread_sync.Bread`)."""
    return LocalClientTransport(bread)


#: The name before issue 25; kept for one release.
LocalTransport = LocalClientTransport
