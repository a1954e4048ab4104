"""The Python client over every kind of connection, sync and async, with one suite.

The `connect` fixture (conftest.py) is parametrized over Memory (DSN, Connection,
pool) and AsyncMemory (DSN, AsyncConnection, AsyncConnectionPool); an async
client is wrapped so each method call runs to completion on the test's event
loop, so the same assertions cover both.
"""

from __future__ import annotations

import asyncio
import pickle
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import pgmemory
from pgmemory import AsyncMemory, FileInfo, Memory
from pgmemory.errors import BY_CODE, translate
from tests.conftest import SERVICE_LOGIN, USER_LOGIN
from tests.python.conftest import Connect
from tests.support import not_the_service

CREATE_A = {"command": "create", "path": "/memories/a.md", "file_text": "hello\nworld\n"}


# ------------------------------------------------------------------ one suite, every kind


def test_user_creates_and_views_a_file(connect: Connect, grant: Any, org: uuid.UUID) -> None:
    user = connect().as_user(grant())
    assert user.run(org, CREATE_A) == "File created successfully at: /memories/a.md"
    assert user.run(org, {"command": "view", "path": "/memories/a.md"}) == (
        "Here's the content of /memories/a.md with line numbers:\n"
        "     1\thello\n"
        "     2\tworld\n"
        "     3\t"
    )


def test_org_may_be_a_string(connect: Connect, grant: Any, org: uuid.UUID) -> None:
    user = connect().as_user(str(grant()))
    assert user.run(str(org), CREATE_A) == "File created successfully at: /memories/a.md"
    assert user.read(org, "/memories/a.md")["content"] == "hello\nworld\n"


def test_run_error_carries_the_exact_text(connect: Connect, grant: Any, org: uuid.UUID) -> None:
    user = connect().as_user(grant())
    with pytest.raises(pgmemory.NotFound) as caught:
        user.run(org, {"command": "view", "path": "/memories/nope.md"})
    err = caught.value
    assert err.message == "The path /memories/nope.md does not exist. Please provide a valid path."
    assert str(err) == err.message
    assert (err.code, err.sqlstate) == ("MEMORY_NOT_FOUND", "P0002")
    assert isinstance(err, pgmemory.PgMemoryError)
    assert isinstance(err.__cause__, psycopg.Error)


def test_write_read_and_conflict(connect: Connect, grant: Any, org: uuid.UUID) -> None:
    user = connect().as_user(grant())
    path = "/memories/notes.md"
    assert user.write(org, path, "v1", expected_version=0) == {"path": path, "version": 1}
    assert user.write(org, path, "v2", expected_version=1) == {"path": path, "version": 2}
    with pytest.raises(pgmemory.Conflict) as caught:
        user.write(org, path, "lost", expected_version=1)
    assert (caught.value.code, caught.value.sqlstate) == ("MEMORY_CONFLICT", "40001")
    assert caught.value.message == f"{path} was expected at version 1 but is at version 2"
    assert user.write(org, path, "v3") == {"path": path, "version": 3}  # unconditional

    got = user.read(org, path)
    assert isinstance(got, dict)
    assert {k: v for k, v in got.items() if k != "updated_at"} == {
        "path": path,
        "content": "v3",
        "version": 3,
    }
    assert isinstance(got["updated_at"], str)
    assert user.read(org, "/memories/missing.md") is None


def test_list_files(connect: Connect, grant: Any, org: uuid.UUID) -> None:
    user = connect().as_user(grant())
    assert user.list_files(org) == []
    user.write(org, "/memories/b.md", "bé")  # 3 bytes
    user.run(org, CREATE_A)
    files = user.list_files(org)
    assert [(f.path, f.bytes, f.version) for f in files] == [
        ("/memories/a.md", 12, 1),
        ("/memories/b.md", 3, 1),
    ]
    assert all(isinstance(f, FileInfo) for f in files)
    assert all(isinstance(f.updated_at, datetime) and f.updated_at.tzinfo for f in files)


def test_render_contains_the_content(connect: Connect, grant: Any, org: uuid.UUID) -> None:
    user = connect().as_user(grant())
    user.write(org, "/memories/preferences.md", "Prefers metric units.")
    text = user.render(org)
    assert isinstance(text, str)
    assert "Prefers metric units." in text
    assert "/memories/preferences.md" in text


def test_namespaces_are_separate(connect: Connect, grant: Any, org: uuid.UUID) -> None:
    user = connect().as_user(grant())
    agent = {"scope": "agent", "agent_id": "helper"}
    user.write(org, "/memories/a.md", "agent's", ns=agent)
    assert user.read(org, "/memories/a.md") is None
    assert user.read(org, "/memories/a.md", ns=agent)["content"] == "agent's"
    assert [f.path for f in user.list_files(org, ns=agent)] == ["/memories/a.md"]


def test_user_without_permission_is_forbidden(connect: Connect, org: uuid.UUID) -> None:
    stranger = connect().as_user(uuid.uuid4())
    with pytest.raises(pgmemory.Forbidden) as caught:
        stranger.run(org, CREATE_A)
    assert (caught.value.code, caught.value.sqlstate) == ("MEMORY_FORBIDDEN", "42501")
    assert caught.value.message == "not permitted: no read permission in this organization"


def test_users_do_not_see_each_other(connect: Connect, grant: Any, org: uuid.UUID) -> None:
    service = connect()
    alice, bob = service.as_user(grant()), service.as_user(grant())
    alice.run(org, CREATE_A)
    assert bob.read(org, "/memories/a.md") is None
    assert bob.list_files(org) == []


def test_service_acts_for_a_user(connect: Connect, grant: Any, org: uuid.UUID) -> None:
    service = connect()
    user_id = grant()
    service.write(org, "/memories/a.md", "from the app", ns={"owner_id": str(user_id)})
    assert service.as_user(user_id).read(org, "/memories/a.md")["content"] == "from the app"
    assert service.write(org, "/memories/o.md", "org", ns={"scope": "organization"}) == {
        "path": "/memories/o.md",
        "version": 1,
    }


def test_untrusted_login_is_not_the_service(connect: Connect, org: uuid.UUID) -> None:
    fake = connect(USER_LOGIN, service=True)
    with pytest.raises(pgmemory.Forbidden) as caught:
        fake.list_files(org, ns={"scope": "organization"})
    assert caught.value.message == not_the_service(USER_LOGIN)


def test_no_identity_leaves_claims_to_the_application(connect: Connect, org: uuid.UUID) -> None:
    # service=False and no as_user: the client does not touch request.jwt.claims,
    # and an ordinary login without claims is nobody.
    with pytest.raises(pgmemory.Forbidden):
        connect(USER_LOGIN, service=False).render(org)


def test_user_login_acts_as_a_user(connect: Connect, grant: Any, org: uuid.UUID) -> None:
    user = connect(USER_LOGIN, service=False).as_user(grant())
    assert user.run(org, CREATE_A) == "File created successfully at: /memories/a.md"


def test_invalid_argument_is_passed_through(connect: Connect, grant: Any, org: uuid.UUID) -> None:
    user = connect().as_user(grant())
    with pytest.raises(pgmemory.InvalidPath) as caught:
        user.run(org, {"command": "view", "path": "/etc/passwd"})
    assert caught.value.message == "Path must start with /memories, got: /etc/passwd"
    # An org that is not a uuid never reaches the database.
    with pytest.raises(pgmemory.Invalid) as refused:
        user.render("not-a-uuid")
    assert refused.value.message == "org must be a uuid, got 'not-a-uuid'"


# ------------------------------------------------------------------ connection handling


def test_borrowed_connection_stays_open_and_idle(
    dsn: str, login_dsn: Callable[[str], str], grant: Any, org: uuid.UUID
) -> None:
    user_id = grant()
    with psycopg.connect(login_dsn(SERVICE_LOGIN)) as conn:
        with Memory(conn, service=True) as mem:
            user = mem.as_user(user_id)
            user.run(org, CREATE_A)
            with Memory(dsn, service=True) as other:  # committed: another connection sees it
                assert other.list_files(org, ns={"owner_id": str(user_id)})[0].path == (
                    "/memories/a.md"
                )
            with pytest.raises(pgmemory.NotFound):
                user.run(org, {"command": "delete", "path": "/memories/zz.md"})
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            # The claims were transaction-local: nothing lingers on the connection.
            claims = conn.execute("SELECT current_setting('request.jwt.claims', true)")
            assert claims.fetchone() == ("",)
        assert not conn.closed
        # pgvector's adapters were registered on the first call.
        assert conn.adapters.types.get("vector") is not None


def test_claims_do_not_leak_on_a_pooled_connection(
    login_dsn: Callable[[str], str], grant: Any, org: uuid.UUID
) -> None:
    # One connection in the pool: the anonymous call reuses the user's connection.
    with ConnectionPool(login_dsn(USER_LOGIN), min_size=1, max_size=1, open=True) as pool:
        anonymous = Memory(pool)
        anonymous.as_user(grant()).run(org, CREATE_A)
        with pytest.raises(pgmemory.Forbidden) as caught:
            anonymous.list_files(org)
        assert caught.value.message == not_the_service(USER_LOGIN)


def test_inside_the_callers_transaction(
    login_dsn: Callable[[str], str], grant: Any, org: uuid.UUID
) -> None:
    # A connection already in a transaction: the call joins it (psycopg's savepoint rule).
    class Undo(Exception):
        pass

    with psycopg.connect(login_dsn(SERVICE_LOGIN)) as conn:
        user = Memory(conn).as_user(grant())
        with pytest.raises(Undo), conn.transaction():
            user.run(org, CREATE_A)
            assert user.read(org, "/memories/a.md")["version"] == 1
            raise Undo
        assert user.read(org, "/memories/a.md") is None


def test_async_users_in_parallel_on_one_pool(
    login_dsn: Callable[[str], str], grant: Any, org: uuid.UUID
) -> None:
    users = [grant() for _ in range(8)]

    async def one(mem: AsyncMemory, user_id: uuid.UUID) -> list[str]:
        user = mem.as_user(user_id)
        await user.write(org, f"/memories/{user_id}.md", "mine")
        return [f.path for f in await user.list_files(org)]

    async def go() -> list[list[str]]:
        async with AsyncConnectionPool(
            login_dsn(USER_LOGIN), min_size=2, max_size=4, open=False
        ) as pool:
            mem = AsyncMemory(pool)
            return await asyncio.gather(*(one(mem, u) for u in users))

    assert asyncio.run(go()) == [[f"/memories/{u}.md"] for u in users]


def test_dsn_client_owns_its_connection(login_dsn: Callable[[str], str], org: uuid.UUID) -> None:
    mem = Memory(login_dsn(SERVICE_LOGIN), service=True)
    assert mem.list_files(org, ns={"scope": "organization"}) == []
    user = mem.as_user(uuid.uuid4())
    user.close()  # a derived client does not close the shared connection
    assert mem.list_files(org, ns={"scope": "organization"}) == []
    with mem:
        pass
    with pytest.raises(psycopg.InterfaceError, match="closed"):
        mem.list_files(org, ns={"scope": "organization"})


def test_async_dsn_client_closes(login_dsn: Callable[[str], str], org: uuid.UUID) -> None:
    async def go() -> None:
        async with AsyncMemory(login_dsn(SERVICE_LOGIN), service=True) as mem:
            assert await mem.list_files(org, ns={"scope": "organization"}) == []
        with pytest.raises(psycopg.InterfaceError, match="closed"):
            await mem.render(org, ns={"scope": "organization"})

    asyncio.run(go())


def test_wrong_target_type() -> None:
    with pytest.raises(TypeError):
        Memory(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        AsyncMemory(object())  # type: ignore[arg-type]


def test_no_vector_type_is_fine(dsn: str, login_dsn: Callable[[str], str], org: uuid.UUID) -> None:
    # pgvector's register_vector raises when `vector` is not on the search_path; the client
    # must carry on without the adapters.
    with psycopg.connect(login_dsn(SERVICE_LOGIN), options="-c search_path=pg_catalog") as conn:
        assert Memory(conn, service=True).list_files(org, ns={"scope": "organization"}) == []
        assert conn.adapters.types.get("vector") is None


# ------------------------------------------------------------------ error translation


@pytest.mark.parametrize("code", sorted(BY_CODE))
def test_translate_every_code(db: psycopg.Connection, code: str) -> None:
    sqlstate = {
        "MEMORY_NOT_FOUND": "P0002",
        "MEMORY_EXISTS": "23505",
        "MEMORY_CONFLICT": "40001",
        "MEMORY_DOCUMENT_CONFLICT": "40001",
        "MEMORY_TOO_LARGE": "54000",
        "MEMORY_FORBIDDEN": "42501",
    }.get(code, "22023")
    with pytest.raises(psycopg.Error) as caught:
        db.execute(
            "DO $$ BEGIN RAISE EXCEPTION USING MESSAGE = 'it: failed', "
            f"HINT = '{code}', ERRCODE = '{sqlstate}'; END $$"
        )
    db.rollback()
    err = translate(caught.value)
    assert type(err) is BY_CODE[code]
    assert type(err).__name__ in pgmemory.__all__
    assert isinstance(err, pgmemory.PgMemoryError)
    assert (err.code, err.sqlstate, err.message, str(err)) == (
        code,
        sqlstate,
        "it: failed",
        "it: failed",
    )
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), again.message, again.sqlstate) == (type(err), err.message, err.sqlstate)


def test_translate_leaves_other_errors_alone(db: psycopg.Connection) -> None:
    for stmt in (
        "SELECT 1/0",
        "DO $$ BEGIN RAISE EXCEPTION 'x' USING HINT = 'MEMORY_SOMETHING_ELSE'; END $$",
    ):
        with pytest.raises(psycopg.Error) as caught:
            db.execute(stmt)
        db.rollback()
        assert translate(caught.value) is caught.value
