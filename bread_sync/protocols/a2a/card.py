"""What an Agent Card says about a bread agent, in neither version's shape: each dialect writes
it (``v03.py``, ``v10.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The card's modes: text in and out (data and file parts are accepted all the same).
MODES = ["text/plain"]


@dataclass(frozen=True, slots=True)
class CardFacts:
    name: str
    description: str
    url: str
    version: str
    skills: list[dict[str, Any]]
    push_notifications: bool = False
    extended_card: bool = False


def card_facts(agent: Any, url: str, version: str, push: bool = False, extended: bool = False) -> CardFacts:
    """The card of ``agent`` served at ``url``: its description, else the first line of its
    prompt, else ``Agent "<id>"``; one skill per skill it has, else one named after it."""
    prompt_line = next((line.strip() for line in (agent.prompt or "").splitlines() if line.strip()), "")
    description = agent.description or prompt_line or f'Agent "{agent.id}"'
    skills = [
        {"id": name, "name": name, "description": skill.description or name, "tags": [agent.id]}
        for name, skill in (agent.skills or {}).items()
    ] or [{"id": agent.id, "name": agent.id, "description": description, "tags": [agent.id]}]
    return CardFacts(agent.id, description, url, version, skills, push, extended)
