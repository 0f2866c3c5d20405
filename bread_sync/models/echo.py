"""The ``echo`` provider: streams the user's latest message back, word by word. No network."""

from __future__ import annotations

import re
from collections.abc import Iterator

from . import ModelRequest, TextDelta

_WORDS = re.compile(r"\s*\S+\s*|\s+")


class EchoProvider:
    name = "echo"

    def stream(self, request: ModelRequest) -> Iterator[TextDelta]:
        text = next((m["content"] for m in reversed(request.messages) if m["role"] == "user"), "")
        for word in _WORDS.findall(text):
            if request.signal.cancelled:
                return
            yield TextDelta(word)


def provider() -> EchoProvider:
    return EchoProvider()
