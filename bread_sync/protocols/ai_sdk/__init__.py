"""The AI SDK: an agent behind ``useChat`` (React, Vue, Svelte) and ``DefaultChatTransport``.

:func:`ai_sdk` (``plugin.py``) is the plugin: ``POST /ai-sdk/<agentId>`` takes the transport's
``{id, messages, trigger}`` (the chat is bread's session, the last message the new turn or the
answer to a pause) and answers the UI message stream protocol v1; ``GET .../<chatId>/stream``
resumes the chat's running run, ``POST .../<chatId>/stop`` cancels it. The translator
(``translator.py``) is sans-IO and stateful, one per stream; ``requests.py`` reads the bodies. No
extra is needed: nothing here imports an AI SDK package. See docs/http.md.
"""

from .plugin import AI_SDK_ACTIONS, PROTOCOL_HEADER, AiSdkPlugin, ai_sdk
from .translator import EMITTED_CHUNK_TYPES, UiMessageStreamTranslator, message_id, sse

__all__ = [
    "AI_SDK_ACTIONS",
    "EMITTED_CHUNK_TYPES",
    "PROTOCOL_HEADER",
    "AiSdkPlugin",
    "UiMessageStreamTranslator",
    "ai_sdk",
    "message_id",
    "sse",
]
