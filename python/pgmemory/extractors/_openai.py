"""OpenAIExtractor: any OpenAI-compatible `/v1/chat/completions`, through the openai SDK."""

from __future__ import annotations

import asyncio
import inspect
import os
from typing import Any

from ._base import ExtractionRequest, ExtractorError, api_error
from ._prompt import OPERATIONS_SCHEMA, SYSTEM_PROMPT, parse_operations, render_request

MISSING = "OpenAIExtractor needs the openai package: pip install 'pgmemory[openai]'"
# Sent when a local server (Ollama, vLLM, llama.cpp) is given without a key: the SDK
# insists on one, the servers ignore it.
PLACEHOLDER_KEY = "no-key"


def _openai() -> Any:
    # Imported on use: pgmemory itself works without the openai package.
    try:
        import openai
    except ImportError as err:
        raise ExtractorError(MISSING, fatal=True) from err
    return openai


def _is_async(client: Any) -> bool:
    return inspect.iscoroutinefunction(inspect.unwrap(client.chat.completions.create))


class OpenAIExtractor:
    """Extraction through an OpenAI-compatible chat completions endpoint: OpenAI,
    Azure's v1 API, Ollama, vLLM, llama.cpp's server and the like.

    The answer is asked for as JSON under a strict JSON schema
    (`response_format` `json_schema`; `schema=False` leaves it out for servers
    that refuse it) and read by a tolerant parser, since local models still wrap
    JSON in prose or code fences. `base_url` defaults to the SDK's
    (`$OPENAI_BASE_URL`, else OpenAI); `api_key` to `$OPENAI_API_KEY`, and with a
    `base_url` but no key a placeholder is sent (local servers need none).
    `client` is an `openai.OpenAI` or `openai.AsyncOpenAI` to use instead (then
    `base_url`, `api_key`, `max_retries` and `timeout` are its own). `max_tokens`
    caps the answer (None: the server's default).

    An answer cut short (`finish_reason` `length`), a refusal, an answer without
    operations in it and every SDK error (after `max_retries` retries) raise
    `ExtractorError`.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        max_tokens: int | None = None,
        schema: bool = True,
        max_retries: int = 2,
        timeout: float = 120.0,
    ) -> None:
        if max_tokens is not None and max_tokens < 1:
            raise ValueError("max_tokens must be positive")
        self.model: str = model
        self.max_tokens = max_tokens
        self.schema = schema
        self._client = client
        self._async_client: Any = None
        self._options: dict[str, Any] = {}
        if client is None:
            _openai()
            base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
            key = api_key or os.environ.get("OPENAI_API_KEY") or None
            if key is None and base_url is None:
                raise ExtractorError(
                    "no OpenAI API key: set OPENAI_API_KEY, or give base_url for a local server",
                    fatal=True,
                )
            self._options = {
                "base_url": base_url,
                "api_key": key or PLACEHOLDER_KEY,
                "max_retries": max_retries,
                "timeout": timeout,
            }

    def __repr__(self) -> str:
        return f"OpenAIExtractor({self.model!r})"

    def _params(self, request: ExtractionRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": render_request(request)},
            ],
        }
        if self.schema:
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": "memory_operations",
                    "strict": True,
                    "schema": OPERATIONS_SCHEMA,
                },
            }
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens
        return params

    def _operations(self, completion: Any) -> list[dict[str, Any]]:
        if not completion.choices:
            raise ExtractorError("the answer has no choices")
        choice = completion.choices[0]
        if choice.finish_reason == "length":
            raise ExtractorError("the answer was cut off (finish_reason length)")
        if choice.finish_reason == "content_filter":
            raise ExtractorError("the answer was withheld by a content filter")
        message = choice.message
        if getattr(message, "refusal", None):
            raise ExtractorError(f"the model refused: {message.refusal}")
        if not message.content:
            raise ExtractorError("the answer is empty")
        return parse_operations(message.content)

    def _sync(self) -> Any:
        if self._client is None:
            self._client = _openai().OpenAI(**self._options)
        return self._client

    def extract(self, request: ExtractionRequest) -> list[dict[str, Any]]:
        client = self._sync()
        if _is_async(client):
            raise TypeError("OpenAIExtractor has an async client: use aextract (AsyncMemory)")
        openai = _openai()
        try:
            completion = client.chat.completions.create(**self._params(request))
        except openai.APIError as err:
            raise api_error(err, "OpenAI") from err
        return self._operations(completion)

    async def aextract(self, request: ExtractionRequest) -> list[dict[str, Any]]:
        if self._options:  # made from our options: the async twin is made the same way
            if self._async_client is None:
                self._async_client = _openai().AsyncOpenAI(**self._options)
            client = self._async_client
        elif not _is_async(self._client):
            return await asyncio.to_thread(self.extract, request)
        else:
            client = self._client
        openai = _openai()
        try:
            completion = await client.chat.completions.create(**self._params(request))
        except openai.APIError as err:
            raise api_error(err, "OpenAI") from err
        return self._operations(completion)
