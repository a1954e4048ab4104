"""The embedder interface and its error."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors: what `Memory(..., embedder=...)` needs.

    `dimensions` is the length of every vector and `model` the name stored with
    them. `embed` takes a whole batch in one call (an implementation may split
    it internally) and returns one vector per text, in order; `aembed` is the
    same for `AsyncMemory`.

    Optional, not part of the protocol's check: `embed_query` / `aembed_query`,
    with the same signature, for a model that embeds what is searched with
    otherwise than what is stored (e5's "query: " and "passage: " prefixes).
    Where an embedder has them, the clients embed every search query through
    them: `archival.search`, `recall.search`, `recall_context` and capture's
    searches for known facts.
    """

    @property
    def dimensions(self) -> int: ...

    @property
    def model(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]: ...


class EmbedderError(Exception):
    """An embedding request failed for good: a 4xx answer, retries exhausted, a bad response.

    `status_code` is the HTTP status of the last answer (None when the server
    could not be reached); `message` is the server's own error message when it
    gave one.
    """

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (self.message, self.status_code))


def _rebuild(message: str, status_code: int | None) -> EmbedderError:
    return EmbedderError(message, status_code=status_code)


def check_texts(texts: Sequence[str]) -> list[str]:
    """The batch as a list; a bare string is refused (it is a Sequence[str] of characters)."""
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not a single str")
    out = list(texts)
    for t in out:
        if not isinstance(t, str):
            raise TypeError(f"embed() takes texts (str), got {type(t).__name__}")
    return out
