"""Tasks: one-shot structured calls, an input schema in and a validated output out (run by
:mod:`bread_sync.engine.task_run`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from .agents import describe_validation
from .cancel import CancelToken
from .errors import INPUT_INVALID, OUTPUT_INVALID, BreadError
from .models import ModelRequest, TextDelta, ToolCall, Usage, resolve_provider
from .tracing import model_call
from .usage import RunUsage, model_key


@dataclass
class Task:
    """``model`` is ``"provider:name"`` or a provider object; ``prompt`` the system prompt.
    The model gets the args as JSON and must answer JSON that ``output_schema`` accepts."""

    id: str
    input_schema: type[BaseModel]
    output_schema: type[BaseModel]
    model: Any = "echo"
    prompt: str = ""
    description: str = ""

    @property
    def model_name(self) -> str:
        return self.model if isinstance(self.model, str) else getattr(self.model, "name", "custom")

    def validate_args(self, args: Any) -> dict[str, Any]:
        try:
            return self.input_schema.model_validate(args).model_dump(mode="json")
        except ValidationError as exc:
            raise BreadError(INPUT_INVALID, describe_validation(exc, f"task {self.id!r} args")) from None

    def call(self, args: dict[str, Any], token: CancelToken, usage: RunUsage | None = None, trace: Any = None) -> Any:
        """One model call; the parsed, validated output. The tokens it used are added to
        ``usage``; ``trace``: the run's :class:`~bread_sync.tracing.RunTrace`, if it is traced."""
        provider, model_name = resolve_provider(self.model)
        request = ModelRequest(
            model=model_name,
            system=self.prompt,
            messages=[{"role": "user", "content": json.dumps(args)}],
            tools=[],
            signal=token,
            input=args,
            output_format="json",
        )
        text: list[str] = []
        used: list[Usage] = []
        calls: list[ToolCall] = []  # a task offers no tool, but its span says so when a model calls one anyway
        try:
            with model_call(trace, provider, model_name, request, text, calls, used) as events:
                for event in events:
                    if isinstance(event, TextDelta):
                        text.append(event.text)
                    elif isinstance(event, Usage):
                        used.append(event)
                    elif isinstance(event, ToolCall):
                        calls.append(event)
        finally:
            if usage is not None:  # a failed call's tokens were spent too
                for event in used:
                    usage.add(model_key(provider.name, model_name), event.input_tokens, event.output_tokens)
        token.raise_if_cancelled()
        try:
            return self.output_schema.model_validate_json("".join(text)).model_dump(mode="json")
        except ValidationError as exc:
            raise BreadError(OUTPUT_INVALID, describe_validation(exc, f"task {self.id!r} output")) from None
