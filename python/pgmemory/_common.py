"""What the sync and async sides share, and the few helpers in which they truly differ.

The async modules in `_async/` are written by hand and tools/async_to_sync.py
generates `_sync/` from them (docs/development.md). What is the same on both
sides and does no I/O is here, once. So are the pairs of helpers that no
mechanical rewrite can turn one into the other (`AsyncWriter` and `Writer`,
`areport` and `report`): the generator only renames the async one to the sync one.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import psycopg

from .calls import DocumentInfo
from .embedders import Embedder

if TYPE_CHECKING:
    from anthropic.types.beta import BetaMemoryTool20250818Command
    from typing_extensions import Self

# ------------------------------------------------------------------ connections

# is_local=true: the claims end with the transaction, so they never leak to the
# next user of a pooled or shared connection.
SET_CLAIMS = "SELECT set_config('request.jwt.claims', %s, true)"


def closed_error() -> psycopg.InterfaceError:
    return psycopg.InterfaceError("the pgmemory client is closed")


# ------------------------------------------------------------------ clients

Ns = dict[str, Any] | None
Id = uuid.UUID | str
FactInput = str | Mapping[str, Any]  # a fact to save: its text, or {"content", "source"?}
# Called after each batch of embed_pending with (written so far, rows in this batch).
OnBatch = Callable[[int, int], object]
# `Documents.list` would shadow the builtin in its class's annotations.
DocumentInfos = list[DocumentInfo]


def user_claims(user_id: uuid.UUID | str) -> str:
    # PostgREST/Supabase-shaped claims; the server reads `sub` and checks `role`.
    return json.dumps({"sub": str(user_id), "role": "authenticated"})


class Client:
    """The part of `Memory` and `AsyncMemory` that does no I/O.

    A client executes calls on its connection source as its identity: the value
    given to `request.jwt.claims` (None leaves the setting alone, '' means no
    claims: the service, a JSON object names a user)."""

    _source: Any
    _claims: str | None
    _owner: bool
    embedder: Embedder | None

    def _init(
        self, source: Any, embedder: Embedder | None, claims: str | None, owner: bool
    ) -> None:
        self._source = source
        self.embedder = embedder
        self._claims = claims
        self._owner = owner  # only the client built from the target closes it

    def as_user(self, user_id: uuid.UUID | str) -> Self:
        """A client on the same connections acting as the user `user_id`."""
        other = object.__new__(type(self))
        other._init(self._source, self.embedder, user_claims(user_id), owner=False)
        return other

    def _need_embedder(self, what: str) -> Embedder:
        if self.embedder is None:
            raise ValueError(f"{what} needs an embedder: pass embedder= to the client")
        return self.embedder

    def _dimensions(self, dimensions: int | None) -> int:
        if dimensions is not None:
            return dimensions
        return self._need_embedder("configure_embeddings() without dimensions").dimensions


# ------------------------------------------------------------------ the memory tool

# The commands the SDK's base classes dispatch to a method; any other command
# (or none) goes to the SQL as well, which refuses it with the text the model sees.
COMMANDS = frozenset({"view", "create", "str_replace", "insert", "delete", "rename"})

CLEARED = "All memory cleared"  # the reference implementation's clear_all_memory text


def command_fields(command: BetaMemoryTool20250818Command) -> dict[str, Any]:
    """The command as the model sent it, for `memory.run`: every field it gave (unknown
    ones too), none left out but those that are null. The SDK builds the command
    without validating it, so checking its fields is left to the SQL."""
    return command.model_dump(mode="json", exclude_none=True, warnings=False)


# ------------------------------------------------------------------ where the sides differ


class AsyncWriter:
    """One write at a time beside the caller, as a task: `embed_pending` writes a batch
    while it embeds the next one."""

    def __init__(self) -> None:
        self._write: asyncio.Future[int] | None = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._write is not None:  # an error meanwhile: let the write end, not dangle
            await asyncio.gather(self._write, return_exceptions=True)

    def start(self, execute: Callable[..., Awaitable[int]], *args: Any) -> None:
        """Start `execute(*args)`; the write started before must have been waited for."""
        assert self._write is None
        self._write = asyncio.ensure_future(execute(*args))

    async def wait(self) -> int:
        """The result of the write started last (or its error)."""
        write, self._write = self._write, None
        assert write is not None
        return await write


class Writer:
    """`AsyncWriter` in a second thread: the database and the embedder work at the same time."""

    def __init__(self) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pgmemory-write")
        self._write: Future[int] | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._thread.shutdown(wait=True)  # an error meanwhile: the write ends, not dangles

    def start(self, execute: Callable[..., int], *args: Any) -> None:
        assert self._write is None
        self._write = self._thread.submit(execute, *args)

    def wait(self) -> int:
        write, self._write = self._write, None
        assert write is not None
        return write.result()


async def areport(on_batch: OnBatch | None, written: int, rows: int) -> None:
    """Tell `on_batch` of a batch written; an awaitable it returns is awaited."""
    if on_batch is not None and inspect.isawaitable(res := on_batch(written, rows)):
        await res


def report(on_batch: OnBatch | None, written: int, rows: int) -> None:
    """Tell `on_batch` of a batch written."""
    if on_batch is not None:
        on_batch(written, rows)
