"""Token usage: what the models of a run (or a task) used, summed by model, in the wire's shape.

``agent:run:end``, ``task:end`` and their records carry ``usage``: ``{inputTokens, outputTokens,
totalTokens, byModel: {"provider:name": {inputTokens, outputTokens, totalTokens}}}``.
"""

from __future__ import annotations

from typing import Any


class RunUsage:
    """Tokens used, by model (``"provider:name"``); summed once per model call, never per delta."""

    __slots__ = ("by_model",)

    def __init__(self) -> None:
        #: model -> [input tokens, output tokens]
        self.by_model: dict[str, list[int]] = {}

    @classmethod
    def from_wire(cls, wire: dict[str, Any] | None) -> RunUsage:
        """The tally a record or checkpoint kept (None: nothing used yet)."""
        usage = cls()
        for model, used in ((wire or {}).get("byModel") or {}).items():
            usage.add(model, used.get("inputTokens", 0), used.get("outputTokens", 0))
        return usage

    def add(self, model: str, input_tokens: int, output_tokens: int) -> None:
        tally = self.by_model.setdefault(model, [0, 0])
        tally[0] += input_tokens
        tally[1] += output_tokens

    def merge(self, other: RunUsage) -> None:
        for model, (input_tokens, output_tokens) in other.by_model.items():
            self.add(model, input_tokens, output_tokens)

    def __bool__(self) -> bool:
        return bool(self.by_model)

    def to_wire(self) -> dict[str, Any] | None:
        """The wire's ``usage``, or None when no model reported any."""
        if not self.by_model:
            return None
        by_model = {model: _tokens(i, o) for model, (i, o) in self.by_model.items()}
        total_in = sum(i for i, _ in self.by_model.values())
        total_out = sum(o for _, o in self.by_model.values())
        return {**_tokens(total_in, total_out), "byModel": by_model}


def model_key(provider_name: str, model_name: str) -> str:
    """How ``byModel`` names a model: ``"provider:name"``."""
    return f"{provider_name}:{model_name}"


def _tokens(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {"inputTokens": input_tokens, "outputTokens": output_tokens, "totalTokens": input_tokens + output_tokens}
