"""What ``DefaultChatTransport`` sends, read: ``{id, messages, trigger, messageId?}``.

Sans-IO: a malformed body is ``INVALID_REQUEST`` naming what is wrong, raised before any run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NoReturn

from ...errors import INVALID_REQUEST, BreadError

#: The triggers a request may carry; a regeneration is not supported (a run is never redone).
SUBMIT = "submit-message"


@dataclass(frozen=True)
class ChatRequest:
    """A chat request: the chat (bread's session) and its last message, the new turn (a user
    message) or the answer to a pause (the assistant message the pause ended, answered)."""

    chat_id: str
    last: dict[str, Any]

    @property
    def answers(self) -> bool:
        """Whether the last message answers a pause rather than starting a turn."""
        return self.last["role"] == "assistant"


def chat_request(body: dict[str, Any]) -> ChatRequest:
    """The body as a :class:`ChatRequest`, or ``INVALID_REQUEST``."""
    chat_id = body.get("id")
    if not isinstance(chat_id, str) or not chat_id.strip():
        _invalid("id must be a non-empty string: it is the chat's id, bread's session")
    trigger = body.get("trigger", SUBMIT)
    if trigger != SUBMIT:
        _invalid(f"trigger {trigger!r} is not supported: only {SUBMIT!r} (a run is never regenerated)")
    if "messageId" in body and not isinstance(body["messageId"], str | None):
        _invalid("messageId must be a string")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        _invalid("messages must be a non-empty list: its last message is the new turn")
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") not in ("user", "assistant"):
        _invalid("the last message must be a user message (or an assistant message answering a pause)")
    if not isinstance(last.get("parts"), list) or not all(isinstance(part, dict) for part in last["parts"]):
        _invalid("the last message's parts must be a list of objects")
    return ChatRequest(chat_id, last)


def turn_text(message: dict[str, Any]) -> str:
    """The new turn: the user message's text parts, joined. Earlier messages are already in the
    session."""
    texts = [part.get("text") for part in message["parts"] if part.get("type") == "text"]
    if not texts or not all(isinstance(text, str) for text in texts):
        _invalid("the last message must hold text parts")
    unread = {part.get("type") for part in message["parts"]} - {"text", "step-start"}
    if unread:
        _invalid(f"the last message's {sorted(map(str, unread))} parts are not supported: send text")
    return "".join(texts)


def answer(message: dict[str, Any], checkpoint: dict[str, Any]) -> Any:
    """What the assistant message answers the paused call with: for an approval the tool
    part's approval (``{"approved": bool}``), for an input its output (an object as given,
    else ``{"answer": output}``). ``INVALID_REQUEST`` when the message does not answer it."""
    part = next((p for p in message["parts"] if p.get("toolCallId") == checkpoint["toolCallId"]), None)
    if part is None:
        _invalid(f"the last message has no part for the paused call {checkpoint['toolCallId']}")
    if checkpoint["kind"] == "approval":
        approval = part.get("approval")
        if part.get("state") != "approval-responded" or not isinstance(approval, dict):
            _invalid("the paused call awaits an approval: answer it with addToolApprovalResponse")
        if approval.get("id") != checkpoint["id"] or not isinstance(approval.get("approved"), bool):
            _invalid("the approval must name the paused call's approvalId and say approved true or false")
        return {"approved": approval["approved"]}
    if part.get("state") != "output-available":
        _invalid("the paused call awaits an input: answer it with addToolOutput")
    output = part.get("output")
    return output if isinstance(output, dict) else {"answer": output}


def _invalid(message: str) -> NoReturn:
    raise BreadError(INVALID_REQUEST, message)
