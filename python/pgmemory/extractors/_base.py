"""The extractor interface, what it is given, and its error."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class ExtractionRequest:
    """What an extractor reads: one chat's new messages, and what it needs beside them.

    `messages` and `context` are as `memory.pending_captures` hands them out:
    `{"id", "role", "content", "created_at"}` (an ISO 8601 text), oldest first;
    `context` holds the messages just before the new ones, already captured.
    `facts` are the contents of the owner's known facts related to the new
    messages; the model names `facts[i]` by the alias `i + 1`, never by its id.
    """

    messages: Sequence[Mapping[str, Any]]
    context: Sequence[Mapping[str, Any]] = ()
    facts: Sequence[str] = ()


@runtime_checkable
class Extractor(Protocol):
    """Asks a language model what a chat's new messages teach about their owner:
    what `Memory.capture_pending(extractor)` needs.

    `model` is the name recorded in every new fact's source. `extract` returns
    the model's operations as it gave them: `{"op": "add", "content"}`,
    `{"op": "supersede", "fact", "content"}` or `{"op": "forget", "fact"}`, with
    `fact` a known fact's alias (an int from 1); `aextract` is the same for
    `AsyncMemory`. A failure, or an answer that cannot be read whole, raises
    `ExtractorError`.
    """

    @property
    def model(self) -> str: ...

    def extract(self, request: ExtractionRequest) -> list[dict[str, Any]]: ...

    async def aextract(self, request: ExtractionRequest) -> list[dict[str, Any]]: ...


class ExtractorError(Exception):
    """The model could not be asked, or its answer could not be read whole.

    `status_code` is the HTTP status of the model server's answer (None when
    there was none, or the answer itself was the problem). `fatal` means no
    capture can succeed (a bad API key, no access, an unknown model):
    `capture_pending` gives the capture back and raises it instead of going on.
    """

    def __init__(self, message: str, *, status_code: int | None = None, fatal: bool = False):
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.fatal = fatal

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (self.message, self.status_code, self.fatal))


def _rebuild(message: str, status_code: int | None, fatal: bool) -> ExtractorError:
    return ExtractorError(message, status_code=status_code, fatal=fatal)


# The HTTP statuses after which no other request can succeed either.
FATAL_STATUSES = frozenset({401, 403, 404})


def api_error(err: Exception, sdk: str) -> ExtractorError:
    """An SDK's APIError (anthropic's or openai's: the same shape) as an ExtractorError
    with the server's own message: `Anthropic API error 529 (overloaded_error): Overloaded`."""
    status = getattr(err, "status_code", None)
    message = getattr(err, "message", None) or str(err)
    body = getattr(err, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    kind = None
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        message = inner["message"]
        kind = inner.get("type") if isinstance(inner.get("type"), str) else None
    where = f"{sdk} API error" + (f" {status}" if status else "") + (f" ({kind})" if kind else "")
    return ExtractorError(f"{where}: {message}", status_code=status, fatal=status in FATAL_STATUSES)
