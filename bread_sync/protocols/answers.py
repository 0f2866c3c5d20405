"""What answers a paused run: which run of a session a next message answers, and what a text
answers it with, for the bridges whose clients can only send text."""

from __future__ import annotations

from typing import Any

#: What a text answering an approval means yes with (any case, around spaces); anything else is no.
YES = frozenset({"yes", "y", "approve", "approved", "true"})


def text_answer(text: str, kind: str) -> dict[str, Any]:
    """The response a text gives a pause of ``kind``: an approval ``{"approved": bool}``, an
    input ``{"answer": text}`` (what an input tool without a schema of its own takes)."""
    if kind == "approval":
        return {"approved": text.strip().lower() in YES}
    return {"answer": text}


def paused_run(bread: Any, session_id: str, agent_id: str) -> dict[str, Any] | None:
    """The session's latest paused run of ``agent_id``, which its next message answers."""
    paused = [r for r in latest_runs(bread, session_id, agent_id, ("paused",)) if r.get("checkpointId")]
    return paused[0] if paused else None


def latest_runs(bread: Any, session_id: str, agent_id: str, statuses: tuple[str, ...]) -> list[dict[str, Any]]:
    """The session's runs of ``agent_id`` in ``statuses``, the latest first."""
    runs = [r for status in statuses for r in bread.store.list_runs(status=status, session=session_id)]
    return sorted((r for r in runs if r["agentId"] == agent_id), key=lambda r: r["createdAt"], reverse=True)
