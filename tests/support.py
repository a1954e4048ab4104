"""Calling the SQL API as a given principal, one transaction per call."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

SERVICE = ""  # empty claims: the service, when the login is trusted


@dataclass(frozen=True)
class Failure:
    sqlstate: str
    hint: str | None
    message: str

    @classmethod
    def of(cls, err: psycopg.Error) -> Failure:
        return cls(err.sqlstate or "", err.diag.message_hint, err.diag.message_primary or "")


def _adapt(param: Any) -> Any:
    """dicts, and lists that hold JSON (or nothing), go as jsonb; flat lists as arrays."""
    if isinstance(param, dict) or (
        isinstance(param, list) and (not param or isinstance(param[0], (dict, list)))
    ):
        return Jsonb(param)
    return param


class Principal:
    """One login connection acting with fixed claims (None = leave claims unset)."""

    def __init__(self, dsn: str, claims: dict[str, Any] | str | None) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.claims = claims if claims is None or isinstance(claims, str) else json.dumps(claims)

    def execute(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        """The rows of one call in a transaction of its own; params go as given."""
        with self.conn.transaction(), self.conn.cursor() as cur:
            if self.claims is not None:
                cur.execute("SELECT set_config('request.jwt.claims', %s, true)", (self.claims,))
            cur.execute(query, params)
            return cur.fetchall() if cur.description else []

    def rows(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        return self.execute(query, [_adapt(p) for p in params])

    def value(self, query: str, *params: Any) -> Any:
        rows = self.rows(query, *params)
        assert len(rows) == 1, rows
        return rows[0][0]

    def attempt(self, query: str, *params: Any) -> list[tuple[Any, ...]] | Failure:
        """The rows, or the error the call raised."""
        try:
            return self.rows(query, *params)
        except psycopg.Error as err:
            return Failure.of(err)

    def fails(self, query: str, *params: Any) -> Failure:
        got = self.attempt(query, *params)
        assert isinstance(got, Failure), f"expected an error from {query} {params}"
        return got

    def run(
        self, org: uuid.UUID | str, command: dict[str, Any], ns: dict[str, Any] | None = None
    ) -> str:
        return self.value("SELECT memory.run(%s, %s, %s)", str(org), command, ns or {})

    def run_fails(
        self, org: uuid.UUID | str, command: dict[str, Any], ns: dict[str, Any] | None = None
    ) -> Failure:
        return self.fails("SELECT memory.run(%s, %s, %s)", str(org), command, ns or {})

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Principal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def not_the_service(login: str, role: str = "memory_service") -> str:
    """What an untrusted login that sends no claims is told."""
    return (
        f"this login is not the service: not a superuser nor a member of role {role}"
        f" (GRANT {role} TO {login} makes it one; a user's call sets request.jwt.claims)"
    )


def user_claims(user_id: uuid.UUID | str) -> dict[str, str]:
    return {"sub": str(user_id), "role": "authenticated"}


def snapshot(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    """Every row of every extension table, for 'nothing changed' checks."""
    with conn.cursor() as cur:
        out: list[tuple[Any, ...]] = []
        for table in ("namespaces", "files", "permissions", "settings"):
            cur.execute(f"SELECT to_jsonb(t)::text FROM memory.{table} t ORDER BY 1")
            out.extend((table, row[0]) for row in cur.fetchall())
        return out


RELEASED_DIR = Path(__file__).resolve().parents[1] / "extension" / "released"


def version_key(version: str) -> tuple[int | str, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.-]", version))


def released_versions() -> list[str]:
    """Versions with a frozen full script in extension/released/, oldest first."""
    names = (p.name[len("memory--") : -4] for p in RELEASED_DIR.glob("memory--*.sql"))
    return sorted((v for v in names if "--" not in v), key=version_key)
