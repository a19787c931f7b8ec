"""The optional LLM layer: a chat client for OpenAI-compatible endpoints
(``pip install 'hmem[openai]'``; ``HMEM_BASE_URL``, ``HMEM_API_KEY``, ``HMEM_LLM``).

Importing this package does not import ``openai``; building an :class:`LLMClient` does.
"""

from hmem.errors import LLMError, LLMNotConfigured, LLMResponseInvalid, LLMUnavailable
from hmem.llm.client import ChatResult, LLMClient, LLMConfig, Usage, strip_fences

__all__ = [
    "ChatResult",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "LLMNotConfigured",
    "LLMResponseInvalid",
    "LLMUnavailable",
    "Usage",
    "strip_fences",
]
