"""Extractors: ask a language model which facts a chat's new messages hold.

- `AnthropicExtractor`: Anthropic's Messages API, one forced tool call; needs the
  extra `pgmemory[anthropic]` (importing it does not).
- `OpenAIExtractor`: any OpenAI-compatible `/v1/chat/completions` (OpenAI, Ollama,
  vLLM, llama.cpp) with a JSON-schema answer; needs the extra `pgmemory[openai]`.

Both follow the `Extractor` protocol; any object with the same three members
works. The prompt, the answer's schema, the tolerant parser and the mapping of
the model's fact numbers back to ids are shared (`SYSTEM_PROMPT`,
`render_request`, `OPERATIONS_SCHEMA`, `parse_operations`, `resolve`), so an
extractor of your own needs only the call to its model.
"""

from ._anthropic import AnthropicExtractor
from ._base import ExtractionRequest, Extractor, ExtractorError
from ._openai import OpenAIExtractor
from ._prompt import (
    OPERATIONS_SCHEMA,
    SYSTEM_PROMPT,
    TOOL_NAME,
    operations_of,
    parse_operations,
    render_request,
    resolve,
)

__all__ = [
    "OPERATIONS_SCHEMA",
    "SYSTEM_PROMPT",
    "TOOL_NAME",
    "AnthropicExtractor",
    "ExtractionRequest",
    "Extractor",
    "ExtractorError",
    "OpenAIExtractor",
    "operations_of",
    "parse_operations",
    "render_request",
    "resolve",
]
