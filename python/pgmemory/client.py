"""`Memory` and `AsyncMemory`: the same API, sync and async.

Each method is one line: build the call (calls.py, shared by both) and execute
it on the client's connection source as the client's identity. The identity is
the value given to `request.jwt.claims`: None leaves the setting alone (the
application sets it itself), '' means no claims (the service, which the server
trusts only from a login that is a member of its service role), and a JSON
object names a user.
"""

from __future__ import annotations

import json
import uuid
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from . import calls
from .calls import FileInfo, Org
from .connection import AsyncSource, Source

if TYPE_CHECKING:
    from typing_extensions import Self

S = TypeVar("S", Source, AsyncSource)
Ns = dict[str, Any] | None


def _user_claims(user_id: uuid.UUID | str) -> str:
    # PostgREST/Supabase-shaped claims; the server reads `sub` and checks `role`.
    return json.dumps({"sub": str(user_id), "role": "authenticated"})


class _Client(Generic[S]):
    _source: S
    _claims: str | None
    _owner: bool
    embedder: Any

    def _init(self, source: S, embedder: Any, claims: str | None, owner: bool) -> None:
        self._source = source
        self.embedder = embedder
        self._claims = claims
        self._owner = owner  # only the client built from the target closes it

    def as_user(self, user_id: uuid.UUID | str) -> Self:
        """A client on the same connections acting as the user `user_id`."""
        other = object.__new__(type(self))
        other._init(self._source, self.embedder, _user_claims(user_id), owner=False)
        return other


class Memory(_Client[Source]):
    """Long-term memory over a DSN, a psycopg Connection or a ConnectionPool."""

    def __init__(
        self,
        target: str | psycopg.Connection[Any] | ConnectionPool[Any],
        embedder: Any = None,
        *,
        service: bool = False,
    ) -> None:
        self._init(Source(target), embedder, "" if service else None, owner=True)

    def close(self) -> None:
        """Close the connection opened from a DSN; a given connection or pool stays open."""
        if self._owner:
            self._source.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def run(self, org: Org, command: dict[str, Any], ns: Ns = None) -> str:
        return self._source.execute(self._claims, calls.run(org, command, ns))

    def render(self, org: Org, ns: Ns = None, max_chars: int | None = None) -> str:
        return self._source.execute(self._claims, calls.render(org, ns, max_chars))

    def read(self, org: Org, path: str, ns: Ns = None) -> dict[str, Any] | None:
        return self._source.execute(self._claims, calls.read(org, path, ns))

    def write(
        self,
        org: Org,
        path: str,
        content: str,
        expected_version: int | None = None,
        ns: Ns = None,
    ) -> dict[str, Any]:
        call = calls.write(org, path, content, expected_version, ns)
        return self._source.execute(self._claims, call)

    def list_files(self, org: Org, ns: Ns = None) -> list[FileInfo]:
        return self._source.execute(self._claims, calls.list_files(org, ns))

    def grant(self, org: Org, user_id: uuid.UUID | str, permission: str = "memory.read") -> None:
        """Give a user a permission in an organization (service only)."""
        self._source.execute(self._claims, calls.grant(org, user_id, permission))

    def revoke(self, org: Org, user_id: uuid.UUID | str, permission: str = "memory.read") -> None:
        """Take a permission back (service only)."""
        self._source.execute(self._claims, calls.revoke(org, user_id, permission))


class AsyncMemory(_Client[AsyncSource]):
    """`Memory` for asyncio: a DSN, a psycopg AsyncConnection or an AsyncConnectionPool."""

    def __init__(
        self,
        target: str | psycopg.AsyncConnection[Any] | AsyncConnectionPool[Any],
        embedder: Any = None,
        *,
        service: bool = False,
    ) -> None:
        self._init(AsyncSource(target), embedder, "" if service else None, owner=True)

    async def close(self) -> None:
        """Close the connection opened from a DSN; a given connection or pool stays open."""
        if self._owner:
            await self._source.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def run(self, org: Org, command: dict[str, Any], ns: Ns = None) -> str:
        return await self._source.execute(self._claims, calls.run(org, command, ns))

    async def render(self, org: Org, ns: Ns = None, max_chars: int | None = None) -> str:
        return await self._source.execute(self._claims, calls.render(org, ns, max_chars))

    async def read(self, org: Org, path: str, ns: Ns = None) -> dict[str, Any] | None:
        return await self._source.execute(self._claims, calls.read(org, path, ns))

    async def write(
        self,
        org: Org,
        path: str,
        content: str,
        expected_version: int | None = None,
        ns: Ns = None,
    ) -> dict[str, Any]:
        call = calls.write(org, path, content, expected_version, ns)
        return await self._source.execute(self._claims, call)

    async def list_files(self, org: Org, ns: Ns = None) -> list[FileInfo]:
        return await self._source.execute(self._claims, calls.list_files(org, ns))

    async def grant(
        self, org: Org, user_id: uuid.UUID | str, permission: str = "memory.read"
    ) -> None:
        """Give a user a permission in an organization (service only)."""
        await self._source.execute(self._claims, calls.grant(org, user_id, permission))

    async def revoke(
        self, org: Org, user_id: uuid.UUID | str, permission: str = "memory.read"
    ) -> None:
        """Take a permission back (service only)."""
        await self._source.execute(self._claims, calls.revoke(org, user_id, permission))
