"""OpenAI-compatible routes: the served agents as models, for the tools that speak only the
OpenAI API (chat UIs, LangChain's ``ChatOpenAI``, LiteLLM, editors, evaluation harnesses).

:func:`openai_api` (``plugin.py``) is the plugin: ``GET /v1/models``, ``POST
/v1/chat/completions`` and ``POST /v1/responses``, streaming and not, ``model`` being an agent's
id. The translators (``translator.py``) are sans-IO and stateful, one per answer; ``requests.py``
reads the bodies. No extra is needed: nothing here imports the ``openai`` package. See
docs/http.md.
"""

from .plugin import OPENAI_ACTIONS, SESSION_HEADER, OpenAiPlugin, openai_api
from .translator import (
    EMITTED_CHAT_CHUNKS,
    EMITTED_RESPONSE_EVENTS,
    ChatCompletionsTranslator,
    ResponsesTranslator,
    chunk_kind,
)

__all__ = [
    "EMITTED_CHAT_CHUNKS",
    "EMITTED_RESPONSE_EVENTS",
    "OPENAI_ACTIONS",
    "SESSION_HEADER",
    "ChatCompletionsTranslator",
    "OpenAiPlugin",
    "ResponsesTranslator",
    "chunk_kind",
    "openai_api",
]
