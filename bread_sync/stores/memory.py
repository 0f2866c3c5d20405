"""The in-memory store: the reference implementation and the tests' double. One process only."""

from __future__ import annotations

import bisect
import copy
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..clock import iso_days_ago, now_iso
from ..crumbs import Frame, to_wire_crumb
from ..errors import SEQ_CONFLICT, BreadError
from . import (
    FINISHED,
    PURGED,
    PUSH_SETTLED,
    RELAY_FIELDS,
    TRACE_FIELD,
    RunRecord,
    RunRow,
    new_push_config,
    runs_page_of,
    tags_match,
)


class MemoryStore:
    def __init__(self) -> None:
        self._lock = threading.RLock()  # reentrant: a batch holds it around the calls it makes
        #: While a batch is open (its lock held): how to undo each write made in it, in order.
        self._undo: list[tuple[Callable[..., None], tuple[Any, ...]]] | None = None
        self._logs: dict[str, list[Frame]] = {}
        self._runs: dict[str, RunRow] = {}
        self._checkpoints: dict[str, dict[str, Any]] = {}
        self._sessions: dict[str, dict[str, Any]] = {}
        self._claims: dict[str, str] = {}
        self._loops: dict[str, dict[str, Any]] = {}
        self._iterations: dict[str, dict[int, dict[str, Any]]] = {}
        self._task_runs: dict[str, dict[str, Any]] = {}
        self._mcp_sessions: dict[str, dict[str, Any]] = {}
        self._pushes: dict[tuple[str, str], dict[str, Any]] = {}

    # crumb log
    def append_crumbs(self, run_id: str, frames: list[Frame]) -> None:
        with self._lock:
            log = self._logs.get(run_id)
            seqs = [f.seq for f in frames]
            if seqs != sorted(set(seqs)) or (log and seqs and seqs[0] <= log[-1].seq):
                raise BreadError(SEQ_CONFLICT, f"run {run_id}: a seq in {seqs} is already written")
            if log is None:
                self._keep_entry(self._logs, run_id)
                log = self._logs[run_id] = []
            else:
                self._keep_length(log)
            # The log holds the wire form, as a store that serialises would return it.
            log.extend(Frame(f.run_id, f.seq, to_wire_crumb(f.crumb)) for f in frames)

    def get_crumbs(self, run_id: str, after: int = 0, limit: int | None = None) -> list[Frame]:
        with self._lock:
            log = self._logs.get(run_id, [])
            start = bisect.bisect_right(log, after, key=lambda f: f.seq)
            return log[start : None if limit is None else start + limit]

    def last_seq(self, run_id: str) -> int:
        with self._lock:
            log = self._logs.get(run_id)
            return log[-1].seq if log else 0

    def last_seqs(self, run_ids: list[str]) -> dict[str, int]:
        with self._lock:
            return {run_id: log[-1].seq for run_id in run_ids if (log := self._logs.get(run_id))}

    def batch(self) -> _Batch:
        return _Batch(self)

    # The undo journal of a batch (_Batch): inside one, each write first keeps how to undo itself.
    def _keep_entry(self, table: dict[Any, Any], key: Any) -> None:
        """Before ``table[key]`` is set, or deleted from a table whose order nobody reads."""
        if self._undo is not None:
            self._undo.append((_put_back, (table, key, table.get(key, _ABSENT))))

    def _keep_contents(self, mapping: dict[Any, Any]) -> None:
        """Before a record's fields change in place, or a table loses entries (its order kept)."""
        if self._undo is not None:
            self._undo.append((_refill, (mapping, mapping.copy())))

    def _keep_length(self, items: list[Any]) -> None:
        """Before ``items`` is extended."""
        if self._undo is not None:
            self._undo.append((_cut, (items, len(items))))

    # runs
    def create_run(self, record: RunRow) -> bool:
        with self._lock:
            if record["id"] in self._runs:
                return False
            self._keep_entry(self._runs, record["id"])
            self._runs[record["id"]] = copy.deepcopy(record)
            return True

    def get_run(self, run_id: str) -> RunRow | None:
        with self._lock:
            return copy.deepcopy(self._runs.get(run_id))

    def update_run(self, run_id: str, expect: dict[str, Any] | None = None, **fields: Any) -> bool:
        unknown = set(fields) - set(RunRecord.model_fields) - set(RELAY_FIELDS) - {TRACE_FIELD}
        if unknown:
            raise TypeError(f"update_run: unknown run fields {sorted(unknown)}")
        with self._lock:
            record = self._runs.get(run_id)
            if record is None or any(record.get(k) != v for k, v in (expect or {}).items()):
                return False
            self._keep_contents(record)
            record.update(fields, updatedAt=now_iso())
            return True

    def claim_queued(
        self, run_id: str, owner: str, lease_until: float, now: float, most_running: int | None = None
    ) -> bool:
        with self._lock:
            record = self._runs.get(run_id)
            if record is None or record["status"] != "queued" or (record.get("notBefore") or 0) > now:
                return False
            running = sum(r["agentId"] == record["agentId"] and r["status"] == "running" for r in self._runs.values())
            if most_running is not None and running >= most_running:
                return False
            self._keep_contents(record)
            record.update(status="running", owner=owner, leaseUntil=lease_until, updatedAt=now_iso())
            return True

    def list_runs(
        self, status: str | None = None, agent: str | None = None, session: str | None = None
    ) -> list[RunRow]:
        with self._lock:
            return [
                copy.deepcopy(r)
                for r in self._runs.values()
                if (status is None or r["status"] == status)
                and (agent is None or r["agentId"] == agent)
                and (session is None or r["sessionId"] == session)
            ]

    def page_runs(
        self,
        agent: str,
        session: str | None = None,
        statuses: list[str] | None = None,
        after: tuple[str, str] | None = None,
        limit: int = 100,
    ) -> list[RunRow]:
        return runs_page_of(self.list_runs(agent=agent, session=session), statuses, after, limit)

    def cancel_requested(self, owner: str) -> list[str]:
        with self._lock:
            return [
                r["id"]
                for r in self._runs.values()
                if r["owner"] == owner and r["status"] == "running" and r["cancelRequested"]
            ]

    # checkpoints
    def save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        with self._lock:
            self._keep_entry(self._checkpoints, checkpoint["id"])
            self._checkpoints[checkpoint["id"]] = copy.deepcopy(checkpoint)

    def get_checkpoint(self, checkpoint_id: str) -> dict[str, Any] | None:
        with self._lock:
            return copy.deepcopy(self._checkpoints.get(checkpoint_id))

    def claim_checkpoint(self, checkpoint_id: str, status: str = "resumed") -> bool:
        with self._lock:
            checkpoint = self._checkpoints.get(checkpoint_id)
            if checkpoint is None or checkpoint["status"] != "pending":
                return False
            self._keep_contents(checkpoint)
            checkpoint["status"] = status
            return True

    # sessions
    def touch_session(
        self, session_id: str, tags: dict[str, str] | None = None, state: dict[str, Any] | None = None
    ) -> None:
        with self._lock:
            now = now_iso()
            session = self._sessions.get(session_id)
            if session is None:
                self._keep_entry(self._sessions, session_id)
                session = self._sessions[session_id] = {
                    "id": session_id,
                    "tags": {},
                    "createdAt": now,
                    "updatedAt": now,
                    "state": {},
                    "messages": [],
                }
            else:
                self._keep_contents(session)
            session["tags"] = {**session["tags"], **(tags or {})}  # a new dict: the kept session holds the old
            session["updatedAt"] = now
            if state is not None:
                session["state"] = copy.deepcopy(state)

    def append_messages(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None:
                self._keep_contents(session)
                self._keep_length(session["messages"])
                session["messages"].extend(copy.deepcopy(messages))
                session["updatedAt"] = now_iso()

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        with self._lock:
            return copy.deepcopy(self._sessions.get(session_id))

    def list_sessions(self, tags: dict[str, str] | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [
                {k: copy.deepcopy(v) for k, v in s.items() if k not in ("messages", "state")}
                for s in self._sessions.values()
                if tags_match(s["tags"], tags)
            ]

    def delete_session(self, session_id: str) -> bool:
        with self._lock:
            return self._forget_entries(self._sessions, [session_id]) == 1

    # session claims
    def claim_session(self, session_id: str, run_id: str, take_from: str | None = None) -> str | None:
        with self._lock:
            holder = self._claims.get(session_id)
            if holder is None or holder == run_id or (take_from is not None and holder == take_from):
                self._keep_entry(self._claims, session_id)
                self._claims[session_id] = run_id
                return None
            return holder

    def release_session(self, session_id: str, run_id: str) -> None:
        with self._lock:
            if self._claims.get(session_id) == run_id:
                self._keep_entry(self._claims, session_id)
                del self._claims[session_id]

    # loops
    def save_loop(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._keep_entry(self._loops, record["id"])
            self._loops[record["id"]] = copy.deepcopy(record)

    def save_loop_iteration(self, loop_id: str, iteration: dict[str, Any]) -> None:
        with self._lock:
            self._keep_entry(self._iterations, loop_id)
            iterations = self._iterations.setdefault(loop_id, {})
            self._keep_entry(iterations, iteration["index"])
            iterations[iteration["index"]] = copy.deepcopy(iteration)

    def list_loops(
        self, session: str | None = None, agent: str | None = None, status: str | None = None
    ) -> list[dict[str, Any]]:
        with self._lock:
            return [
                copy.deepcopy(r)
                for r in self._loops.values()
                if _matches(r, sessionId=session, agentId=agent, status=status)
            ]

    def get_loop(self, loop_id: str) -> dict[str, Any] | None:
        with self._lock:
            if loop_id not in self._loops:
                return None
            iterations = self._iterations.get(loop_id, {})
            ordered = [iterations[i] for i in sorted(iterations)]
            return copy.deepcopy({"loop": self._loops[loop_id], "iterations": ordered})

    # task runs
    def save_task_run(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._keep_entry(self._task_runs, record["id"])
            self._task_runs[record["id"]] = copy.deepcopy(record)

    def list_task_runs(
        self,
        task: str | None = None,
        session: str | None = None,
        agent: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        with self._lock:
            found = [
                copy.deepcopy(r)
                for r in reversed(self._task_runs.values())
                if _matches(r, taskId=task, sessionId=session, agentId=agent, status=status)
            ]
        return found[:limit] if limit is not None else found

    def get_task_run(self, task_run_id: str) -> dict[str, Any] | None:
        with self._lock:
            return copy.deepcopy(self._task_runs.get(task_run_id))

    def cleanup_sessions(self, older_than_days: float | None = None, tags: dict[str, str] | None = None) -> int:
        cutoff = None if older_than_days is None else iso_days_ago(older_than_days)
        with self._lock:
            doomed = [
                sid
                for sid, s in self._sessions.items()
                if tags_match(s["tags"], tags) and (cutoff is None or s["updatedAt"] < cutoff)
            ]
            return self._forget_entries(self._sessions, doomed)

    # MCP sessions
    def create_mcp_session(self, record: dict[str, Any]) -> bool:
        with self._lock:
            if record["id"] in self._mcp_sessions:
                return False
            self._keep_entry(self._mcp_sessions, record["id"])
            self._mcp_sessions[record["id"]] = copy.deepcopy(record)
            return True

    def get_mcp_session(self, session_id: str) -> dict[str, Any] | None:
        with self._lock:
            return copy.deepcopy(self._mcp_sessions.get(session_id))

    def delete_mcp_session(self, session_id: str) -> bool:
        with self._lock:
            return self._forget_entries(self._mcp_sessions, [session_id]) == 1

    def touch_mcp_session(self, session_id: str, used_at: str) -> bool:
        with self._lock:
            session = self._mcp_sessions.get(session_id)
            if session is not None:
                self._keep_contents(session)
                session["usedAt"] = used_at
            return session is not None

    def evict_mcp_sessions(self, owner: str, keep: int) -> int:
        with self._lock:
            owned = [k for k, s in self._mcp_sessions.items() if s["owner"] == owner]  # oldest first
            return self._forget_entries(self._mcp_sessions, owned[: max(len(owned) - keep, 0)])

    def expire_mcp_sessions(self, used_before: str) -> int:
        with self._lock:
            expired = [k for k, s in self._mcp_sessions.items() if s["usedAt"] < used_before]
            return self._forget_entries(self._mcp_sessions, expired)

    def _forget_entries(self, table: dict[Any, Any], keys: Iterable[Any]) -> int:
        """Delete those of ``keys`` that ``table`` has; how many."""
        found = [key for key in keys if key in table]
        if found:
            self._keep_contents(table)
        for key in found:
            del table[key]
        return len(found)

    # retention
    # push subscriptions
    def save_push_config(self, config: dict[str, Any]) -> None:
        with self._lock:
            key = (config["taskId"], config["id"])
            held = self._pushes.get(key)
            if held is None:
                self._keep_entry(self._pushes, key)
                self._pushes[key] = copy.deepcopy(new_push_config(config, time.time()))
            else:
                self._keep_contents(held)
                held.update({k: copy.deepcopy(config.get(k)) for k in ("url", "token", "authentication")})

    def list_push_configs(self, task_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return [copy.deepcopy(c) for (task, _), c in self._pushes.items() if task == task_id]

    def delete_push_config(self, task_id: str, config_id: str) -> bool:
        with self._lock:
            return self._forget_entries(self._pushes, [(task_id, config_id)]) == 1

    def claim_push(self, owner: str, now: float, until: float) -> dict[str, Any] | None:
        with self._lock:
            free = [c for c in self._pushes.values() if c["claimedUntil"] is None or c["claimedUntil"] < now]
            due = [c for c in free if not c["done"] and c["nextAttemptAt"] <= now]
            if not due:
                return None
            config = min(due, key=lambda c: c["nextAttemptAt"])
            self._keep_contents(config)
            config.update(claimedBy=owner, claimedUntil=until)
            return copy.deepcopy(config)

    def settle_push(self, task_id: str, config_id: str, owner: str, **fields: Any) -> bool:
        unknown = set(fields) - PUSH_SETTLED
        if unknown:
            raise ValueError(f"settle_push cannot set {sorted(unknown)}")
        with self._lock:
            config = self._pushes.get((task_id, config_id))
            if config is None or config["claimedBy"] != owner:
                return False
            self._keep_contents(config)
            config.update(fields, claimedBy=None, claimedUntil=None)
            return True

    def hasten_push(self, task_id: str, now: float) -> bool:
        with self._lock:
            waiting = [
                c
                for (task, _), c in self._pushes.items()
                if task == task_id and not c["done"] and not c["attempts"] and c["claimedBy"] is None
            ]
            for config in waiting:
                self._keep_contents(config)
                config["nextAttemptAt"] = min(config["nextAttemptAt"], now)
            return bool(waiting)

    def purge(self, before: str, dry_run: bool = False) -> dict[str, int]:
        with self._lock:
            runs = {r["id"] for r in self._runs.values() if r["status"] in FINISHED and r["updatedAt"] < before}
            doomed = {
                "runs": runs,
                "crumbs": {(run_id, f.seq) for run_id in runs for f in self._logs.get(run_id, [])},
                "checkpoints": {k for k, c in self._checkpoints.items() if _spent(c, runs, before)},
                "loops": {k for k, loop in self._loops.items() if loop.get("runId") in runs},
                "taskRuns": {k for k, t in self._task_runs.items() if _task_run_done(t, runs, before)},
                "mcpSessions": {k for k, s in self._mcp_sessions.items() if s["createdAt"] < before},
            }
            if not dry_run:
                self._forget(doomed)
        return {kind: len(doomed[kind]) for kind in PURGED}

    def _forget(self, doomed: dict[str, set[Any]]) -> None:
        runs, loops = doomed["runs"], doomed["loops"]
        self._forget_entries(self._runs, runs)
        self._forget_entries(self._logs, runs)
        self._forget_entries(self._checkpoints, doomed["checkpoints"])
        self._forget_entries(self._loops, loops)
        self._forget_entries(self._iterations, loops)
        self._forget_entries(self._task_runs, doomed["taskRuns"])
        self._forget_entries(self._mcp_sessions, doomed["mcpSessions"])


def _spent(checkpoint: dict[str, Any], runs: set[str], before: str) -> bool:
    if checkpoint["status"] == "pending":
        return False
    return checkpoint.get("runId") in runs or checkpoint.get("createdAt", before) < before


def _task_run_done(record: dict[str, Any], runs: set[str], before: str) -> bool:
    if record.get("runId") is not None:
        return record["runId"] in runs
    return record["status"] != "running" and record["createdAt"] < before


def _matches(record: dict[str, Any], **wanted: Any) -> bool:
    return all(value is None or record.get(key) == value for key, value in wanted.items())


def store() -> MemoryStore:
    return MemoryStore()


class _Batch:
    """``with store.batch():`` the store's calls inside as one write, under its lock. An exception
    out of it undoes every write made in it, as SQLite's rollback does: the store is left as it
    was when the batch began (a log never holds a run's end whose record write refused). Each
    write inside a batch first keeps in the store's journal how to undo itself (``_keep_*``);
    the undos run last first. Nested batches join the outer one. (A class, not a generator: a
    durable crumb with writes beside it opens one.)"""

    __slots__ = ("outer", "store")

    def __init__(self, store: MemoryStore):
        self.store = store
        self.outer = False

    def __enter__(self) -> None:
        store = self.store
        store._lock.acquire()
        self.outer = store._undo is None  # else a nested batch, which joins the outer one
        if self.outer:
            store._undo = []

    def __exit__(self, kind: type[BaseException] | None, *rest: Any) -> None:
        store = self.store
        try:
            if self.outer:
                journal, store._undo = store._undo or [], None
                if kind is not None:
                    for undo, args in reversed(journal):
                        undo(*args)
        finally:
            store._lock.release()


#: What a batch's undo of a new entry puts back: no entry.
_ABSENT = object()


def _put_back(table: dict[Any, Any], key: Any, old: Any) -> None:
    if old is _ABSENT:
        table.pop(key, None)
    else:
        table[key] = old


def _refill(mapping: dict[Any, Any], old: dict[Any, Any]) -> None:
    # In place, not a new dict put in its table: a copy of that table kept by a later deletion
    # holds this very object.
    mapping.clear()
    mapping.update(old)


def _cut(items: list[Any], length: int) -> None:
    del items[length:]
