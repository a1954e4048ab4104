"""docs/supabase.md's set-up on Supabase's role layout, without Supabase or PostgREST.

A database is made as hosted Supabase has it where the guide relies on it:
pgvector in schema `extensions`, the roles `anon`, `authenticated`,
`service_role` (BYPASSRLS) and the login `authenticator` (NOINHERIT, a member
of the three). memory is installed either way the guide offers that runs here
(CREATE EXTENSION from the files, or the plain install), the guide's grants
are applied, and the service is named either way the guide offers (setting
service_role, or the memory_service group granted to authenticator).
Requests are made the way PostgREST makes them: logged in as authenticator,
in one transaction, SET LOCAL ROLE to the token's role and
`request.jwt.claims` set transaction-locally to its claims.

Not covered: pg_tle (tests/python/test_pgtle.py pins the SQL sent to it),
PostgREST, supabase.com.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pgmemory import plain
from tests.conftest import SERVICE_GROUP, ServerInfo

API_ROLES = ("anon", "authenticated", "service_role")
LOGIN = "authenticator"


def dsn(server: ServerInfo, dbname: str, user: str = "postgres") -> str:
    return f"postgresql://{user}@/{dbname}?host={server.host}&port={server.port}"


@pytest.fixture(scope="module")
def supabase_roles(pg_server: ServerInfo) -> Iterator[None]:
    """Supabase's API roles, cluster-wide for this module, dropped after it."""
    with psycopg.connect(dsn(pg_server, "postgres"), autocommit=True) as conn:
        conn.execute("CREATE ROLE anon NOLOGIN NOINHERIT")
        conn.execute("CREATE ROLE authenticated NOLOGIN NOINHERIT")
        conn.execute("CREATE ROLE service_role NOLOGIN NOINHERIT BYPASSRLS")
        conn.execute(f"CREATE ROLE {LOGIN} LOGIN NOINHERIT")
        conn.execute(f"GRANT anon, authenticated, service_role TO {LOGIN}")
    yield
    with psycopg.connect(dsn(pg_server, "postgres"), autocommit=True) as conn:
        conn.execute(f"DROP ROLE {LOGIN}, anon, authenticated, service_role")


@pytest.fixture(
    scope="module",
    params=[
        ("extension", "setting"),
        ("extension", "group"),
        ("plain", "setting"),
        ("plain", "group"),
    ],
    ids=lambda p: "-".join(p),
)
def project(
    request: pytest.FixtureRequest, pg_server: ServerInfo, supabase_roles: None
) -> Iterator[str]:
    """A database set up as the guide says; its name."""
    install, service = request.param
    name = f"supa_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn(pg_server, "postgres"), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE template0")
    try:
        with psycopg.connect(dsn(pg_server, name), autocommit=True) as conn:
            conn.execute("CREATE SCHEMA extensions")  # Supabase has it
            conn.execute("CREATE EXTENSION vector WITH SCHEMA extensions")
            if install == "extension":
                conn.execute("CREATE EXTENSION memory")
            else:
                plain.install(conn)
            conn.execute("GRANT USAGE ON SCHEMA memory TO authenticated, service_role")
            if service == "setting":
                conn.execute("SELECT memory.configure('service_role', '\"service_role\"')")
            else:
                conn.execute(f"GRANT {SERVICE_GROUP} TO {LOGIN}")
        yield name
    finally:
        with psycopg.connect(dsn(pg_server, "postgres"), autocommit=True) as conn:
            conn.execute(f"REVOKE {SERVICE_GROUP} FROM {LOGIN}")
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


class Api:
    """Requests as PostgREST makes them for a token with `claims`."""

    def __init__(self, server: ServerInfo, dbname: str) -> None:
        self.dsn = dsn(server, dbname, LOGIN)

    def call(self, claims: dict[str, Any], query: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, autocommit=True) as conn, conn.transaction():
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(claims["role"])))
            conn.execute("SELECT set_config('request.jwt.claims', %s, true)", (json.dumps(claims),))
            return conn.execute(query, params).fetchall()

    def fails(self, claims: dict[str, Any], query: str, *params: Any) -> psycopg.Error:
        with pytest.raises(psycopg.Error) as err:
            self.call(claims, query, *params)
        return err.value


@pytest.fixture
def api(project: str, pg_server: ServerInfo) -> Api:
    return Api(pg_server, project)


SERVICE_KEY = {"role": "service_role", "iss": "supabase"}


def user(user_id: uuid.UUID) -> dict[str, Any]:
    return {"sub": str(user_id), "role": "authenticated", "aud": "authenticated"}


def test_pgvector_is_in_schema_extensions(api: Api) -> None:
    (row,) = api.call(
        SERVICE_KEY, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
        " WHERE attrelid = 'memory.facts'::regclass AND attname = 'embedding'",
    )  # fmt: skip
    assert row == ("extensions.vector(1536)",)


def test_a_user_token_acts_for_that_user_and_the_service_key_as_the_service(api: Api) -> None:
    org, alice, bob = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    for who in (alice, bob):
        api.call(SERVICE_KEY, "SELECT memory.grant(%s, %s, 'memory.read')", org, who)
    create = {"command": "create", "path": "/memories/a.md", "file_text": "alice's\n"}
    assert api.call(user(alice), "SELECT memory.run(%s, %s)", org, json.dumps(create)) == [
        ("File created successfully at: /memories/a.md",)
    ]
    assert api.call(user(alice), "SELECT path FROM memory.list_files(%s)", org) == [
        ("/memories/a.md",)
    ]
    assert api.call(user(bob), "SELECT path FROM memory.list_files(%s)", org) == []
    # A user cannot act as the service, whatever the token's other claims say.
    err = api.fails(user(alice), "SELECT memory.grant(%s, %s, 'memory.read')", org, bob)
    assert err.sqlstate == "42501" and err.diag.message_hint == "MEMORY_FORBIDDEN"


def test_anon_is_refused_at_the_schema(api: Api) -> None:
    err = api.fails({"role": "anon"}, "SELECT memory.render(%s)", uuid.uuid4())
    assert err.sqlstate == "42501" and "permission denied for schema memory" in str(err)


@pytest.mark.parametrize("role", API_ROLES)
def test_no_api_role_reads_a_table(api: Api, role: str) -> None:
    claims = SERVICE_KEY if role == "service_role" else {"role": role, "sub": str(uuid.uuid4())}
    err = api.fails(claims, "SELECT count(*) FROM memory.facts")
    assert err.sqlstate == "42501", err  # service_role's BYPASSRLS does not matter: no grant


def test_every_table_has_rls_and_no_policy(project: str, pg_server: ServerInfo) -> None:
    with psycopg.connect(dsn(pg_server, project)) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.relrowsecurity,"
            " (SELECT count(*) FROM pg_policy p WHERE p.polrelid = c.oid)"
            " FROM pg_class c WHERE c.relnamespace = 'memory'::regnamespace AND c.relkind = 'r'"
        ).fetchall()
    assert rows and all(rls and policies == 0 for _, rls, policies in rows), rows
