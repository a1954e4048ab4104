"""Errors a new user meets first: each says what is wrong and names the fix."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import pgmemory
from tests.conftest import USER_LOGIN, ServerInfo
from tests.python.conftest import Connect


@pytest.fixture
def bare_db(pg_server: ServerInfo) -> Iterator[str]:
    """A database without the extension."""
    name = f"bare_{uuid.uuid4().hex[:8]}"
    admin_dsn = pg_server.server.dsn()
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    yield f"postgresql://postgres@/{name}?host={pg_server.host}&port={pg_server.port}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_a_database_without_the_extension_says_create_extension(bare_db: str) -> None:
    with (
        pgmemory.Memory(bare_db, service=True) as mem,
        pytest.raises(pgmemory.SetupError) as caught,
    ):
        mem.list_files(uuid.uuid4(), ns={"scope": "organization"})
    assert caught.value.message == (
        "the memory extension is not installed in this database:"
        " run CREATE EXTENSION memory CASCADE (see `pgmemory install-extension`)"
    )
    assert caught.value.sqlstate == "3F000"


def test_a_login_without_usage_on_the_schema_is_told_the_grant(
    db: psycopg.Connection, login_dsn: Callable[[str], str]
) -> None:
    role = f"nousage_{uuid.uuid4().hex[:8]}"
    db.execute(f"CREATE ROLE {role} LOGIN")
    db.commit()
    try:
        with pgmemory.Memory(login_dsn(role)) as mem, pytest.raises(pgmemory.SetupError) as caught:
            mem.as_user(uuid.uuid4()).list_files(uuid.uuid4())
        assert caught.value.message == (
            f"login role {role} may not use schema memory: GRANT USAGE ON SCHEMA memory TO {role}"
        )
    finally:
        db.execute(f"DROP ROLE {role}")
        db.commit()


@pytest.mark.parametrize("org", ["acme", "", "1234"])
def test_an_org_that_is_not_a_uuid_is_refused_before_the_database(
    connect: Connect, org: str
) -> None:
    with pytest.raises(pgmemory.Invalid) as caught:
        connect().run(org, {"command": "view", "path": "/memories"})
    assert caught.value.message == f"org must be a uuid, got {org!r}"


def test_uuid_objects_are_accepted_in_namespaces(
    connect: Connect, grant: Any, org: uuid.UUID
) -> None:
    user_id = grant()
    service = connect()
    ns = {"scope": "agent", "agent_id": "planner", "owner_id": user_id}  # a UUID, not a str
    assert service.write(org, "/memories/a.md", "x", ns=ns) == {
        "path": "/memories/a.md",
        "version": 1,
    }
    own_agent = {"scope": "agent", "agent_id": "planner"}
    assert service.as_user(user_id).read(org, "/memories/a.md", ns=own_agent)["content"] == "x"
    service.archival.save(org, "Works in Lisbon", ns={"owner_id": user_id})
    assert [h.content for h in service.as_user(user_id).archival.search(org, "Lisbon")] == [
        "Works in Lisbon"
    ]


def test_the_service_flag_from_an_untrusted_login_names_the_role(connect: Connect) -> None:
    with pytest.raises(pgmemory.Forbidden) as caught:
        connect(USER_LOGIN, service=True).render(uuid.uuid4(), ns={"scope": "organization"})
    assert caught.value.message == (
        "this login is not the service: not a superuser nor a member of role memory_service"
        f" (GRANT memory_service TO {USER_LOGIN} makes it one;"
        " a user's call sets request.jwt.claims)"
    )


def test_a_user_id_that_is_not_a_uuid_is_named_as_such(connect: Connect) -> None:
    with pytest.raises(pgmemory.Forbidden) as caught:
        connect().as_user("alice").render(uuid.uuid4())
    assert caught.value.message == 'not authenticated: the claims\' sub is not a uuid: "alice"'
