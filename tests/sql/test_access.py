"""Tenancy, identity and access: who may read and change which memory."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from tests.conftest import SERVICE_LOGIN, USER_LOGIN
from tests.support import SERVICE, Failure, not_the_service, user_claims

NAMESPACES = [
    {},
    {"scope": "user"},
    {"scope": "agent", "agent_id": "planner"},
    {"scope": "chat", "chat_id": "chat-1"},
    {"scope": "project", "project_id": "proj-1"},
]
EMPTY_ROOT = (
    "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n"
    "0B\t/memories"
)
NO_READ = Failure(
    "42501", "MEMORY_FORBIDDEN", "not permitted: no read permission in this organization"
)


def _create(path: str, text: str = "secret\n") -> dict:
    return {"command": "create", "path": path, "file_text": text}


@pytest.mark.parametrize("ns", NAMESPACES, ids=lambda ns: ns.get("scope", "default"))
def test_user_cannot_reach_another_users_files(member, org, ns):
    _, alice = member()
    _, bob = member()
    alice.run(org, _create("/memories/diary/today.md"), ns)
    missing = "The path /memories/diary/today.md does not exist. Please provide a valid path."

    assert bob.run(org, {"command": "view", "path": "/memories"}, ns) == EMPTY_ROOT
    assert bob.run_fails(
        org, {"command": "view", "path": "/memories/diary/today.md"}, ns
    ) == Failure("P0002", "MEMORY_NOT_FOUND", missing)
    assert bob.run_fails(
        org,
        {
            "command": "str_replace",
            "path": "/memories/diary/today.md",
            "old_str": "s",
            "new_str": "t",
        },
        ns,
    ) == Failure("P0002", "MEMORY_NOT_FOUND", missing)
    assert bob.run_fails(org, {"command": "delete", "path": "/memories/diary"}, ns) == Failure(
        "P0002", "MEMORY_NOT_FOUND", "The path /memories/diary does not exist"
    )
    assert bob.rows("SELECT * FROM memory.list_files(%s, %s)", org, ns) == []
    assert bob.value("SELECT memory.render(%s, %s)", org, ns) == ""
    assert bob.value("SELECT memory.read(%s, '/memories/diary/today.md', %s)", org, ns) is None
    # Bob's write lands in his own namespace; Alice's file is untouched.
    assert bob.value(
        "SELECT memory.write(%s, '/memories/diary/today.md', 'mine', 0, %s)", org, ns
    ) == {
        "path": "/memories/diary/today.md",
        "version": 1,
    }
    assert alice.value(
        "SELECT memory.read(%s, '/memories/diary/today.md', %s) ->> 'content'", org, ns
    ) == ("secret\n")


def test_namespaces_of_one_user_are_separate(member, org):
    _, alice = member()
    for index, ns in enumerate(NAMESPACES[1:]):
        alice.run(org, _create(f"/memories/n{index}.md"), ns)
    for index, ns in enumerate(NAMESPACES[1:]):
        assert [
            r[0] for r in alice.rows("SELECT path FROM memory.list_files(%s, %s)", org, ns)
        ] == [f"/memories/n{index}.md"]
    other_agent = {"scope": "agent", "agent_id": "writer"}
    assert alice.rows("SELECT * FROM memory.list_files(%s, %s)", org, other_agent) == []


def test_org_admin_cannot_read_a_users_files(member, org):
    alice_id, alice = member()
    _, admin = member("memory.read", "memory.manage")
    alice.run(org, _create("/memories/private.md"))
    assert admin.run(org, {"command": "view", "path": "/memories"}) == EMPTY_ROOT
    assert admin.value("SELECT memory.read(%s, '/memories/private.md')", org) is None
    assert admin.rows("SELECT * FROM memory.list_files(%s)", org) == []
    for scope in ({"scope": "user"}, {"scope": "organization"}):
        assert "private" not in admin.value("SELECT memory.render(%s, %s)", org, scope)
    # Naming the user is the service's privilege only.
    assert admin.run_fails(
        org, {"command": "view", "path": "/memories"}, {"owner_id": str(alice_id)}
    ) == Failure("42501", "MEMORY_FORBIDDEN", "not permitted: only the service may pass owner_id")


def test_organization_memory_needs_manage_to_change(member, org):
    _, reader = member()
    _, admin = member("memory.read", "memory.manage")
    org_ns = {"scope": "organization"}
    forbidden = Failure(
        "42501",
        "MEMORY_FORBIDDEN",
        "not permitted: changing organization memory needs the manage permission",
    )
    assert reader.run_fails(org, _create("/memories/policy.md"), org_ns) == forbidden
    assert (
        reader.fails("SELECT memory.write(%s, '/memories/policy.md', 'x', NULL, %s)", org, org_ns)
        == forbidden
    )
    assert admin.run(org, _create("/memories/policy.md", "Answer in English.\n"), org_ns) == (
        "File created successfully at: /memories/policy.md"
    )
    # Every member reads organization memory, and sees it first in render.
    reader.run(org, _create("/memories/me.md", "I am the reader.\n"))
    assert reader.value("SELECT memory.render(%s)", org) == (
        '<memory_file path="/memories/policy.md" scope="organization">\nAnswer in English.\n</memory_file>\n'
        '<memory_file path="/memories/me.md" scope="user">\nI am the reader.\n</memory_file>'
    )
    assert (
        reader.run_fails(
            org,
            {
                "command": "str_replace",
                "path": "/memories/policy.md",
                "old_str": "English",
                "new_str": "X",
            },
            org_ns,
        )
        == forbidden
    )
    assert (
        reader.run_fails(org, {"command": "delete", "path": "/memories/policy.md"}, org_ns)
        == forbidden
    )


def test_user_without_read_permission_cannot_use_memory(as_, service, org):
    user = uuid.uuid4()
    service.rows(
        "SELECT memory.grant(%s, %s, 'memory.manage')", org, user
    )  # manage alone is not read
    outsider = as_(user_claims(user))
    assert outsider.run_fails(org, {"command": "view", "path": "/memories"}) == NO_READ
    assert outsider.run_fails(org, _create("/memories/a.md")) == NO_READ
    for query in (
        "SELECT memory.render(%s)",
        "SELECT * FROM memory.list_files(%s)",
        "SELECT memory.read(%s, '/memories/a.md')",
        "SELECT memory.write(%s, '/memories/a.md', 'x')",
    ):
        assert outsider.fails(query, org) == NO_READ, query


def test_read_permission_is_per_organization(member, org):
    other_org = uuid.uuid4()
    _, alice = member()
    assert alice.run_fails(other_org, {"command": "view", "path": "/memories"}) == NO_READ


def test_revoke_takes_read_away(member, service, org):
    alice_id, alice = member()
    alice.run(org, _create("/memories/a.md"))
    service.rows("SELECT memory.revoke(%s, %s, 'memory.read')", org, alice_id)
    assert alice.run_fails(org, {"command": "view", "path": "/memories/a.md"}) == NO_READ


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        (None, not_the_service(USER_LOGIN)),
        (
            "not json",
            "not authenticated: request.jwt.claims is not valid JSON:"
            " invalid input syntax for type json",
        ),
        ('"a string"', "not authenticated: request.jwt.claims is not a JSON object"),
        ({"role": "authenticated"}, "not authenticated: claims carry no user id (sub)"),
        (
            {"sub": "alice", "role": "authenticated"},
            'not authenticated: the claims\' sub is not a uuid: "alice"',
        ),
        ({"role": "service_role"}, "not permitted: this login may not act as the service"),
        (
            {"role": "service_role", "sub": str(uuid.uuid4())},
            "not permitted: this login may not act as the service",
        ),
    ],
)
def test_untrusted_login_never_becomes_the_service(as_, login_dsn, org, claims, message):
    web = as_(claims if claims is not None else "", login_dsn(USER_LOGIN))
    assert web.run_fails(org, {"command": "view", "path": "/memories"}, {}) == Failure(
        "42501", "MEMORY_FORBIDDEN", message
    )


def test_owner_id_is_service_only(member, org):
    _, alice = member()
    ns = {"owner_id": str(uuid.uuid4())}
    assert alice.run_fails(org, {"command": "view", "path": "/memories"}, ns) == Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: only the service may pass owner_id"
    )


def test_service_login_acts_for_a_user(as_, login_dsn, member, org):
    alice_id, alice = member()
    app = as_(SERVICE, login_dsn(SERVICE_LOGIN))
    app.run(org, _create("/memories/from-service.md", "hello\n"), {"owner_id": str(alice_id)})
    assert (
        alice.value("SELECT memory.read(%s, '/memories/from-service.md') ->> 'content'", org)
        == "hello\n"
    )
    # The same trusted login with a user's claims is that user, nothing more.
    as_alice = as_(user_claims(alice_id), login_dsn(SERVICE_LOGIN))
    assert (
        as_alice.value("SELECT memory.read(%s, '/memories/from-service.md') ->> 'content'", org)
        == "hello\n"
    )
    assert (
        as_alice.fails("SELECT memory.grant(%s, %s, 'memory.manage')", org, alice_id).hint
        == "MEMORY_FORBIDDEN"
    )


def test_web_login_with_user_claims_works_through_functions_only(as_, login_dsn, service, org):
    user = uuid.uuid4()
    service.rows("SELECT memory.grant(%s, %s, 'memory.read')", org, user)
    web = as_(user_claims(user), login_dsn(USER_LOGIN))
    assert (
        web.run(org, _create("/memories/a.md", "x"))
        == "File created successfully at: /memories/a.md"
    )
    for table in ("namespaces", "files", "permissions", "settings"):
        failure = web.fails(f"SELECT * FROM memory.{table}")
        assert (failure.sqlstate, failure.message) == (
            "42501",
            f"permission denied for table {table}",
        )
        assert web.fails(f"DELETE FROM memory.{table}").sqlstate == "42501"
    probes = (
        "memory._caller()",
        "memory._resolve(%s, '{}', 'write')",
        "memory.has_permission(%s, gen_random_uuid(), 'memory.read')",
    )
    for helper in probes:
        args = (org,) if "%s" in helper else ()
        assert web.fails(f"SELECT {helper}", *args).sqlstate == "42501"


def test_service_only_functions_refuse_users(member, org):
    user_id, alice = member("memory.read", "memory.manage")
    service_only = Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: only the service may do this"
    )
    assert (
        alice.fails("SELECT memory.grant(%s, %s, 'memory.manage')", org, uuid.uuid4())
        == service_only
    )
    assert alice.fails("SELECT memory.revoke(%s, %s, 'memory.read')", org, user_id) == service_only
    assert alice.fails("SELECT memory.configure('max_render', '100')") == service_only


def test_replaceable_permission_check(as_, service, org, db):
    db.execute(
        "CREATE FUNCTION public.app_can(org uuid, who uuid, permission text) RETURNS boolean "
        "LANGUAGE sql AS $$ SELECT permission = 'memory.read' AND who::text LIKE 'aaaaaaaa%' $$"
    )
    db.commit()
    assert service.value("SELECT memory.configure('permission_check', '\"public.app_can\"')") == (
        "public.app_can(uuid,uuid,text)"
    )
    allowed = as_(user_claims("aaaaaaaa-0000-0000-0000-000000000001"))
    denied = as_(user_claims("bbbbbbbb-0000-0000-0000-000000000001"))
    assert allowed.run(org, {"command": "view", "path": "/memories"}) == EMPTY_ROOT
    assert denied.run_fails(org, {"command": "view", "path": "/memories"}) == NO_READ
    # Back to the built-in grants.
    service.value("SELECT memory.configure('permission_check', 'null')")
    assert allowed.run_fails(org, {"command": "view", "path": "/memories"}) == NO_READ


def test_renamed_permissions(member, service, org):
    user_id, alice = member("app.memory.read")
    assert alice.run_fails(org, {"command": "view", "path": "/memories"}) == NO_READ
    service.value("SELECT memory.configure('permissions.read', '\"app.memory.read\"')")
    assert alice.run(org, {"command": "view", "path": "/memories"}) == EMPTY_ROOT
    assert (
        service.value("SELECT memory.has_permission(%s, %s, 'app.memory.read')", org, user_id)
        is True
    )


def test_dropped_permission_check_fails_closed(as_, service, org, db):
    db.execute(
        "CREATE FUNCTION public.gone(org uuid, who uuid, permission text) RETURNS boolean "
        "LANGUAGE sql AS $$ SELECT true $$"
    )
    db.commit()
    service.value("SELECT memory.configure('permission_check', '\"public.gone\"')")
    # The bound call depends on it: a plain DROP is refused and says why.
    with pytest.raises(psycopg.errors.DependentObjectsStillExist):
        db.execute("DROP FUNCTION public.gone(uuid, uuid, text)")
    db.rollback()
    db.execute("DROP FUNCTION public.gone(uuid, uuid, text) CASCADE")
    db.commit()
    user = as_(user_claims(uuid.uuid4()))
    assert user.run_fails(org, {"command": "view", "path": "/memories"}) == Failure(
        "42501",
        "MEMORY_FORBIDDEN",
        "not permitted: the configured permission_check function does not exist",
    )


@pytest.mark.parametrize("permission", ["", "p" * 257, None])
def test_grant_and_revoke_refuse_bad_permissions(service, org, permission):
    bad = Failure(
        "22023",
        "MEMORY_INVALID",
        "a permission needs an organization, a user and a name of at most 256 bytes",
    )
    assert service.fails("SELECT memory.grant(%s, gen_random_uuid(), %s)", org, permission) == bad
    assert service.fails("SELECT memory.revoke(%s, gen_random_uuid(), %s)", org, permission) == bad
