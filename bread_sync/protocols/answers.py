"""What a text answers a paused run with, for the bridges whose clients can only send text."""

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
