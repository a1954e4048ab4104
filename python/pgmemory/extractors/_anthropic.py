"""AnthropicExtractor: the anthropic SDK's Messages API, one forced tool call."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from ._base import ExtractionRequest, ExtractorError, api_error
from ._prompt import (
    OPERATIONS_SCHEMA,
    SYSTEM_PROMPT,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    operations_of,
    render_request,
)

# What `pgmemory capture` and the demo use without --model: fast, cheap, good at this.
DEFAULT_MODEL = "claude-haiku-4-5"
MISSING = "AnthropicExtractor needs the anthropic package: pip install 'pgmemory[anthropic]'"


def _anthropic() -> Any:
    # Imported on use: pgmemory itself works without the anthropic package.
    try:
        import anthropic
    except ImportError as err:
        raise ExtractorError(MISSING, fatal=True) from err
    return anthropic


def _is_async(client: Any) -> bool:
    # The SDK wraps its methods; the coroutine function is underneath.
    return inspect.iscoroutinefunction(inspect.unwrap(client.messages.create))


class AnthropicExtractor:
    """Extraction through Anthropic's Messages API.

    The model must call one tool, whose input schema is the list of operations
    (`tool_choice` forces it), so the answer arrives as structured input, not
    as text to parse. `client` is an `anthropic.Anthropic` or
    `anthropic.AsyncAnthropic` (or the SDK's Bedrock or Vertex client); None
    makes them from the environment (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`),
    the async one on first use by `aextract`. A sync client serves `aextract`
    in a thread; an async client cannot serve `extract`.

    An answer cut at `max_tokens`, a refusal, an answer without the tool call
    and every SDK error (after the SDK's own retries) raise `ExtractorError`.
    """

    def __init__(self, model: str, *, client: Any = None, max_tokens: int = 4096) -> None:
        if max_tokens < 1:
            raise ValueError("max_tokens must be positive")
        self.model: str = model
        self.max_tokens = max_tokens
        self._client = client
        self._async_client: Any = None  # made from the environment, on first use
        self._from_env = client is None
        if client is None:
            self._client = _anthropic().Anthropic()
            if self._client.api_key is None and self._client.auth_token is None:
                raise ExtractorError("no Anthropic API key: set ANTHROPIC_API_KEY", fatal=True)

    def __repr__(self) -> str:
        return f"AnthropicExtractor({self.model!r})"

    def _params(self, request: ExtractionRequest) -> dict[str, Any]:
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": SYSTEM_PROMPT,
            "messages": [{"role": "user", "content": render_request(request)}],
            "tools": [
                {
                    "name": TOOL_NAME,
                    "description": TOOL_DESCRIPTION,
                    "input_schema": OPERATIONS_SCHEMA,
                }
            ],
            "tool_choice": {"type": "tool", "name": TOOL_NAME},
        }

    def _operations(self, message: Any) -> list[dict[str, Any]]:
        if message.stop_reason == "max_tokens":
            raise ExtractorError(f"the answer was cut off at max_tokens ({self.max_tokens})")
        if message.stop_reason == "refusal":
            raise ExtractorError("the model refused to answer")
        for block in message.content:
            if getattr(block, "type", None) == "tool_use" and block.name == TOOL_NAME:
                return operations_of(block.input)
        raise ExtractorError(
            f"the model did not call {TOOL_NAME} (stop_reason {message.stop_reason})"
        )

    def extract(self, request: ExtractionRequest) -> list[dict[str, Any]]:
        if _is_async(self._client):
            raise TypeError("AnthropicExtractor has an async client: use aextract (AsyncMemory)")
        anthropic = _anthropic()
        try:
            message = self._client.messages.create(**self._params(request))
        except anthropic.APIError as err:
            raise api_error(err, "Anthropic") from err
        return self._operations(message)

    async def aextract(self, request: ExtractionRequest) -> list[dict[str, Any]]:
        client = self._client
        if self._from_env:
            if self._async_client is None:
                self._async_client = _anthropic().AsyncAnthropic()
            client = self._async_client
        elif not _is_async(client):
            return await asyncio.to_thread(self.extract, request)
        anthropic = _anthropic()
        try:
            message = await client.messages.create(**self._params(request))
        except anthropic.APIError as err:
            raise api_error(err, "Anthropic") from err
        return self._operations(message)
