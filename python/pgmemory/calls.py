"""Every SQL call the client makes, defined once for `Memory` and `AsyncMemory`.

A function here returns a `Call`: the SQL text, its parameters and how to shape
the fetched rows into the method's result. The clients only execute calls, so
sync and async cannot drift apart. Arguments are cast explicitly in the SQL so
a `str` org or a `None` argument resolves to the one function signature.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from psycopg.types.json import Jsonb

if TYPE_CHECKING:
    from typing_extensions import LiteralString

T = TypeVar("T")
Org = uuid.UUID | str
Rows = Sequence[tuple[Any, ...]]


@dataclass(frozen=True)
class Call(Generic[T]):
    sql: LiteralString
    params: tuple[Any, ...]
    shape: Callable[[Rows], T]


@dataclass(frozen=True)
class FileInfo:
    """One core memory file, as listed by `list_files`."""

    path: str
    bytes: int
    version: int
    updated_at: datetime


def _ns(ns: dict[str, Any] | None) -> Jsonb:
    # None means the caller's own user namespace, which the SQL spells '{}'.
    return Jsonb({} if ns is None else ns)


def _value(rows: Rows) -> Any:
    return rows[0][0]


def run(org: Org, command: dict[str, Any], ns: dict[str, Any] | None) -> Call[str]:
    return Call(
        "SELECT memory.run(%s::uuid, %s::jsonb, %s::jsonb)",
        (org, Jsonb(command), _ns(ns)),
        _value,
    )


def render(org: Org, ns: dict[str, Any] | None, max_chars: int | None) -> Call[str]:
    return Call(
        "SELECT memory.render(%s::uuid, %s::jsonb, %s::int)",
        (org, _ns(ns), max_chars),
        _value,
    )


def read(org: Org, path: str, ns: dict[str, Any] | None) -> Call[dict[str, Any] | None]:
    return Call(
        "SELECT memory.read(%s::uuid, %s::text, %s::jsonb)",
        (org, path, _ns(ns)),
        _value,
    )


def write(
    org: Org, path: str, content: str, expected_version: int | None, ns: dict[str, Any] | None
) -> Call[dict[str, Any]]:
    return Call(
        "SELECT memory.write(%s::uuid, %s::text, %s::text, %s::bigint, %s::jsonb)",
        (org, path, content, expected_version, _ns(ns)),
        _value,
    )


def list_files(org: Org, ns: dict[str, Any] | None) -> Call[list[FileInfo]]:
    return Call(
        "SELECT path, bytes, version, updated_at FROM memory.list_files(%s::uuid, %s::jsonb)",
        (org, _ns(ns)),
        lambda rows: [FileInfo(*row) for row in rows],
    )


def grant(org: Org, user_id: uuid.UUID | str, permission: str) -> Call[None]:
    return Call(
        "SELECT memory.grant(%s::uuid, %s::uuid, %s::text)",
        (org, user_id, permission),
        lambda rows: None,
    )


def revoke(org: Org, user_id: uuid.UUID | str, permission: str) -> Call[None]:
    return Call(
        "SELECT memory.revoke(%s::uuid, %s::uuid, %s::text)",
        (org, user_id, permission),
        lambda rows: None,
    )
