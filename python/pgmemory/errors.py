"""Errors raised by pgmemory: one class per HINT code of the SQL API (SPEC §5).

The SQL functions raise with a human message (for `memory.run`, exactly the text
the model should see), a stable code in HINT and a SQLSTATE. The client turns a
psycopg error carrying one of those codes into the matching class below; any
other database error is passed through unchanged.
"""

from __future__ import annotations

import psycopg


class PgMemoryError(Exception):
    """Base class of every error the memory functions raise on purpose."""

    code: str = ""  # the HINT code; each subclass names its own

    def __init__(self, message: str, *, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate

    def __reduce__(self) -> tuple[object, ...]:
        # Keep sqlstate across pickling (multiprocessing, task queues).
        return (_rebuild, (type(self), self.message, self.sqlstate))


def _rebuild(cls: type[PgMemoryError], message: str, sqlstate: str | None) -> PgMemoryError:
    return cls(message, sqlstate=sqlstate)


class NotFound(PgMemoryError):
    """The path, id or document does not exist."""

    code = "MEMORY_NOT_FOUND"


class NoMatch(PgMemoryError):
    """str_replace: old_str does not appear in the file."""

    code = "MEMORY_NO_MATCH"


class Ambiguous(PgMemoryError):
    """str_replace: old_str appears more than once."""

    code = "MEMORY_AMBIGUOUS"


class Exists(PgMemoryError):
    """rename onto a path that already exists."""

    code = "MEMORY_EXISTS"


class Conflict(PgMemoryError):
    """The core file changed since `expected_version`."""

    code = "MEMORY_CONFLICT"


class DocumentConflict(PgMemoryError):
    """The document's version is stale."""

    code = "MEMORY_DOCUMENT_CONFLICT"


class InvalidPath(PgMemoryError):
    """Path outside /memories, traversal, or bad characters."""

    code = "MEMORY_INVALID_PATH"


class Invalid(PgMemoryError):
    """Malformed command, namespace or argument."""

    code = "MEMORY_INVALID"


class TooLarge(PgMemoryError):
    """Content over the `max_content` setting."""

    code = "MEMORY_TOO_LARGE"


class Forbidden(PgMemoryError):
    """Not authenticated, not permitted, or not the service."""

    code = "MEMORY_FORBIDDEN"


class EmbeddingInvalid(PgMemoryError):
    """Wrong count of vectors, mixed lengths, wrong dimension, NaN/Infinity."""

    code = "EMBEDDING_INVALID"


# The one table from HINT code to class.
BY_CODE: dict[str, type[PgMemoryError]] = {
    cls.code: cls
    for cls in (
        NotFound,
        NoMatch,
        Ambiguous,
        Exists,
        Conflict,
        DocumentConflict,
        InvalidPath,
        Invalid,
        TooLarge,
        Forbidden,
        EmbeddingInvalid,
    )
}


def translate(exc: psycopg.Error) -> Exception:
    """The pgmemory error for `exc` if its HINT is one of our codes, else `exc` itself."""
    cls = BY_CODE.get(exc.diag.message_hint or "")
    if cls is None:
        return exc
    # The primary message only: no "ERROR:" prefix, no CONTEXT lines.
    message = exc.diag.message_primary
    return cls(message if message is not None else str(exc), sqlstate=exc.sqlstate)
