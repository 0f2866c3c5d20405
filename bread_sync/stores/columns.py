"""The SQL stores' column names for the record keys of the store contract, shared by the
SQLite and Postgres stores, whose tables spell them the same."""

from __future__ import annotations

#: RunRecord keys and their columns, in the order every SELECT of runs lists them.
RUN_COLUMNS = {
    "id": "id", "agentId": "agent_id", "sessionId": "session_id", "status": "status",
    "checkpointId": "checkpoint_id", "owner": "owner", "leaseUntil": "lease_until",
    "cancelRequested": "cancel_requested", "createdAt": "created_at", "updatedAt": "updated_at",
    "remoteRunId": "remote_run_id", "remoteSeq": "remote_seq",
}  # fmt: skip

#: A push subscription's keys (as the store contract spells them) and their columns.
PUSH_COLUMNS = {
    "taskId": "task_id", "id": "id", "mount": "mount", "url": "url", "token": "token",
    "authentication": "authentication", "delivered": "delivered", "attempts": "attempts",
    "nextAttemptAt": "next_attempt_at", "lastError": "last_error", "done": "done", "claimedBy": "claimed_by",
    "claimedUntil": "claimed_until", "createdAt": "created_at",
}  # fmt: skip


def run_column(key: str) -> str:
    """The column of a run record's key; a TypeError naming the fields for any other key."""
    try:
        return RUN_COLUMNS[key]
    except KeyError:
        raise TypeError(f"a run record has no field {key!r}; its fields are {sorted(RUN_COLUMNS)}") from None
