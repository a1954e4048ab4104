"""Errors raised by pgmemory: one class per HINT code of the SQL API.

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


class SetupError(PgMemoryError):
    """The database is not ready for pgmemory: no extension, or no access to its schema.

    Raised by the client (the SQL never raises it); the message names the fix.
    """

    code = "PGMEMORY_SETUP"


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


def _setup_problem(exc: psycopg.Error, login: str | None) -> str | None:
    """What is missing when a call fails before reaching any memory function."""
    message = exc.diag.message_primary or ""
    if isinstance(exc, psycopg.errors.InvalidSchemaName) and '"memory"' in message:
        return (
            "the memory extension is not installed in this database:"
            " run CREATE EXTENSION memory CASCADE (see `pgmemory install-extension`)"
        )
    if isinstance(exc, psycopg.errors.UndefinedFunction) and "memory." in message:
        return (
            f"{message}: the memory extension is not installed in this database, or is older"
            " than this client (CREATE EXTENSION memory CASCADE, or ALTER EXTENSION memory UPDATE)"
        )
    if (
        isinstance(exc, psycopg.errors.InsufficientPrivilege)
        and exc.diag.message_hint is None
        and message == "permission denied for schema memory"
    ):
        role = login or "<this login role>"
        return (
            f"login role {role} may not use schema memory: GRANT USAGE ON SCHEMA memory TO {role}"
        )
    return None


def translate(exc: psycopg.Error, login: str | None = None) -> Exception:
    """The pgmemory error for `exc`: the class of its HINT code, a SetupError when the
    database lacks the extension or the login lacks access to it, else `exc` itself."""
    cls = BY_CODE.get(exc.diag.message_hint or "")
    if cls is None:
        problem = _setup_problem(exc, login)
        return exc if problem is None else SetupError(problem, sqlstate=exc.sqlstate)
    # The primary message only: no "ERROR:" prefix, no CONTEXT lines.
    message = exc.diag.message_primary
    return cls(message if message is not None else str(exc), sqlstate=exc.sqlstate)
