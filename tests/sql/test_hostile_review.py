"""Regression tests for a hostile review: each attack as an outsider would run it.

The permission plug-in must never become a way up, malformed claims and
imported rows must never escape as raw errors or reach another user's rows,
and an id of someone else's memory answers exactly like a random id.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgmemory import server as embedded
from tests.conftest import SERVICE_LOGIN
from tests.support import Failure, Principal, snapshot, user_claims

CONFIGURE = "SELECT memory.configure('permission_check', %s::jsonb)"
LIST = "SELECT * FROM memory.list_files(%s)"
NO_READ = Failure(
    "42501", "MEMORY_FORBIDDEN", "not permitted: no read permission in this organization"
)
PLUGIN_FAILED = Failure(
    "42501", "MEMORY_FORBIDDEN", "not permitted: the configured permission_check function failed"
)
IMPORT = "SELECT memory.import(%s, %s::jsonb, %s)"
EXPORT = "SELECT memory.export(%s, %s)"
MAX_VERSION = 2**53 - 1


NOT_TRUSTED = Failure(
    "42501",
    "MEMORY_FORBIDDEN",
    "not permitted: the configured permission_check function may not be used: it is neither"
    " SECURITY DEFINER nor owned by a superuser, so it would run with the extension owner's"
    " rights for whoever can replace it",
)


def _refused(signature: str, problem: str) -> Failure:
    return Failure(
        "22023", "MEMORY_INVALID", f"setting permission_check may not be {signature}: {problem}"
    )


INVOKER_PROBLEM = (
    "it is neither SECURITY DEFINER nor owned by a superuser, so it would run with the"
    " extension owner's rights for whoever can replace it"
)


class Attacker:
    """A fresh ordinary login that may create functions in schema public."""

    def __init__(self, db: psycopg.Connection, login_dsn: Callable[[str], str]) -> None:
        self.role = f"attacker_{uuid.uuid4().hex[:12]}"
        self._db = db
        db.execute(f"CREATE ROLE {self.role} LOGIN")
        db.execute(f"GRANT USAGE ON SCHEMA memory TO {self.role}")
        db.execute(f"GRANT CREATE ON SCHEMA public TO {self.role}")
        db.commit()
        self.session = Principal(login_dsn(self.role), None)

    def sql(self, query: str) -> None:
        self.session.rows(query)

    def is_superuser(self) -> bool:
        return self._db.execute(
            "SELECT rolsuper FROM pg_roles WHERE rolname = %s", (self.role,)
        ).fetchone()[0]

    def escalating_body(self) -> str:
        """A plug-in body that makes the attacker a superuser if it ever can."""
        return f"BEGIN EXECUTE 'ALTER ROLE {self.role} SUPERUSER'; RETURN true; END"

    def drop(self) -> None:
        self.session.close()
        self._db.rollback()
        self._db.execute(f"DROP OWNED BY {self.role} CASCADE")
        self._db.execute(f"DROP ROLE {self.role}")
        self._db.commit()


@pytest.fixture
def attacker(db: psycopg.Connection, login_dsn) -> Iterator[Attacker]:
    made = Attacker(db, login_dsn)
    yield made
    made.drop()


# ---------------------------------------------------------------- 1: the plug-in's rights


def test_an_invoker_plugin_owned_by_a_login_is_refused(attacker, service, member, org):
    attacker.sql(
        "CREATE FUNCTION public.chk(o uuid, u uuid, p text) RETURNS boolean LANGUAGE plpgsql AS $$"
        f"{attacker.escalating_body()}$$"
    )
    assert service.fails(CONFIGURE, '"public.chk"') == _refused(
        "public.chk(uuid,uuid,text)", INVOKER_PROBLEM
    )
    _, alice = member()
    assert alice.rows(LIST, org) == []  # still the built-in check, which never ran the function
    assert service.value("SELECT memory.setting('permission_check')") == (
        "memory.has_permission(uuid,uuid,text)"
    )
    assert attacker.is_superuser() is False


def test_a_definer_plugin_runs_as_its_owner_never_as_the_extension_owner(
    attacker, service, as_, org
):
    # It answers whether it runs as the attacker: true lets the user in.
    attacker.sql(
        "CREATE FUNCTION public.chk(o uuid, u uuid, p text) RETURNS boolean LANGUAGE sql"
        f" SECURITY DEFINER AS $$ SELECT current_user = '{attacker.role}' $$"
    )
    assert service.value(CONFIGURE, '"public.chk"') == "public.chk(uuid,uuid,text)"
    user = as_(user_claims(uuid.uuid4()))
    assert user.rows(LIST, org) == []


def test_a_plugin_replaced_after_configure_fails_closed_and_gains_nothing(
    attacker, service, as_, org
):
    attacker.sql(
        "CREATE FUNCTION public.chk(o uuid, u uuid, p text) RETURNS boolean LANGUAGE sql"
        " SECURITY DEFINER AS $$ SELECT true $$"
    )
    service.value(CONFIGURE, '"public.chk"')
    user = as_(user_claims(uuid.uuid4()))
    assert user.rows(LIST, org) == []
    # Swapped for an invoker that would run as the extension owner: refused on every call,
    # from a read-only call too, and the escalation never runs.
    attacker.sql(
        "CREATE OR REPLACE FUNCTION public.chk(o uuid, u uuid, p text) RETURNS boolean"
        f" LANGUAGE plpgsql AS $${attacker.escalating_body()}$$"
    )
    assert user.fails(LIST, org) == NOT_TRUSTED
    assert user.run_fails(org, {"command": "view", "path": "/memories"}) == NOT_TRUSTED
    assert attacker.is_superuser() is False
    # Made a definer again, it runs as the attacker, whose ALTER ROLE fails: closed.
    attacker.sql("ALTER FUNCTION public.chk(uuid, uuid, text) SECURITY DEFINER")
    assert user.fails(LIST, org) == PLUGIN_FAILED
    assert attacker.is_superuser() is False


def test_a_plugin_that_errors_or_answers_null_fails_closed(db, service, as_, org):
    db.execute(
        "CREATE FUNCTION public.broken(o uuid, u uuid, p text) RETURNS boolean LANGUAGE plpgsql"
        " AS $$ BEGIN RAISE EXCEPTION 'app table missing: app.memberships'; END $$;"
        "CREATE FUNCTION public.unsure(o uuid, u uuid, p text) RETURNS boolean LANGUAGE sql"
        " AS $$ SELECT NULL::boolean $$"
    )
    db.commit()
    user = as_(user_claims(uuid.uuid4()))
    service.value(CONFIGURE, '"public.broken"')
    assert user.fails(LIST, org) == PLUGIN_FAILED  # the application's text stays in the log
    service.value(CONFIGURE, '"public.unsure"')
    assert user.fails(LIST, org) == NO_READ


# ---------------------------------------------------------------- 2: temporary schemas


def test_a_plugin_in_a_temporary_schema_is_refused(service):
    service.rows(
        "CREATE FUNCTION pg_temp.chk(o uuid, u uuid, p text) RETURNS boolean LANGUAGE sql"
        " SECURITY DEFINER AS $$ SELECT true $$"
    )
    temp_schema = service.value("SELECT nspname FROM pg_namespace WHERE oid = pg_my_temp_schema()")
    problem = "it lives in a temporary schema, where any login can create a function of that name"
    for spelling in ("pg_temp.chk", f"{temp_schema}.chk", f"{temp_schema}.chk(uuid,uuid,text)"):
        assert service.fails(CONFIGURE, json.dumps(spelling)) == _refused(
            f"{temp_schema}.chk(uuid,uuid,text)", problem
        )
    assert service.value("SELECT count(*) FROM memory.settings") == 0


# ---------------------------------------------------------------- 3: by oid, not by name


def test_the_validated_function_is_the_one_called(db, attacker, service, as_, member, org):
    allowed_id = uuid.uuid4()
    db.execute(
        "CREATE FUNCTION public.allow(o uuid, u uuid, p text) RETURNS boolean LANGUAGE sql"
        f" AS $$ SELECT p = 'memory.read' AND u = '{allowed_id}' $$"
    )
    db.commit()
    service.value(CONFIGURE, '"public.allow"')
    allowed = as_(user_claims(allowed_id))
    _, denied = member()  # granted memory.read, which the plug-in no longer consults
    # An overload with the same leading arguments, and a look-alike in the caller's
    # temporary schema: neither changes which function runs.
    attacker.sql(
        "CREATE FUNCTION public.allow(o uuid, u uuid, p text, extra int DEFAULT 0) RETURNS boolean"
        f" LANGUAGE plpgsql AS $${attacker.escalating_body()}$$"
    )
    allowed.rows(
        "CREATE FUNCTION pg_temp.allow(o uuid, u uuid, p text) RETURNS boolean"
        " LANGUAGE sql AS $$ SELECT false $$"
    )
    assert allowed.rows(LIST, org) == []
    assert allowed.run(org, {"command": "view", "path": "/memories"}).startswith("Here're")
    assert denied.fails(LIST, org) == NO_READ
    assert attacker.is_superuser() is False
    # Naming it again now that the overload exists: a call by name would be ambiguous.
    assert service.fails(CONFIGURE, '"public.allow"') == Failure(
        "22023",
        "MEMORY_INVALID",
        "setting permission_check may not be public.allow(uuid,uuid,text): an overload of it"
        " takes the same arguments, so a call by name is ambiguous",
    )
    assert allowed.rows(LIST, org) == []  # the bound function still serves


def test_a_renamed_plugin_is_still_the_function_called(db, service, as_, org):
    user_id = uuid.uuid4()
    db.execute(
        "CREATE FUNCTION public.before(o uuid, u uuid, p text) RETURNS boolean LANGUAGE sql"
        f" AS $$ SELECT u = '{user_id}' $$"
    )
    db.commit()
    service.value(CONFIGURE, '"public.before"')
    db.execute("ALTER FUNCTION public.before(uuid, uuid, text) RENAME TO after")
    db.execute(
        "CREATE FUNCTION public.before(o uuid, u uuid, p text) RETURNS boolean LANGUAGE sql"
        " AS $$ SELECT false $$"
    )
    db.commit()
    assert as_(user_claims(user_id)).rows(LIST, org) == []


def test_a_bound_plugin_survives_dump_and_restore(db, dsn, service, as_, org, pg_server, tmp_path):
    user_id = uuid.uuid4()
    db.execute(
        "CREATE SCHEMA app;"
        "CREATE FUNCTION app.allow(o uuid, u uuid, p text) RETURNS boolean LANGUAGE sql"
        f" AS $$ SELECT u = '{user_id}' $$"
    )
    db.commit()
    service.value(CONFIGURE, '"app.allow"')
    restored = f"restored_{uuid.uuid4().hex[:8]}"
    bin_dir = embedded.pg_bin_dir()
    dump = tmp_path / "dump.sql"
    subprocess.run([bin_dir / "pg_dump", "--no-owner", "-f", dump, dsn], check=True)
    admin = psycopg.connect(dsn, autocommit=True)
    admin.execute(f"CREATE DATABASE {restored}")
    try:
        target = dsn.replace(f"/{db.info.dbname}?", f"/{restored}?")
        subprocess.run(
            [bin_dir / "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", dump, target],
            check=True,
            capture_output=True,
        )
        copy = Principal(target, user_claims(user_id))
        stranger = Principal(target, user_claims(uuid.uuid4()))
        try:
            assert copy.rows(LIST, org) == []
            assert stranger.fails(LIST, org) == NO_READ
        finally:
            copy.close()
            stranger.close()
    finally:
        admin.execute(f"DROP DATABASE {restored} WITH (FORCE)")
        admin.close()


# ---------------------------------------------------------------- 4: the extension's own functions


@pytest.mark.parametrize("name", ["memory._permitted", "memory._permitted(uuid,uuid,text)"])
def test_internal_helpers_are_refused_as_plugin(service, member, org, name):
    assert service.fails(CONFIGURE, json.dumps(name)) == _refused(
        "memory._permitted(uuid,uuid,text)",
        "it is one of the extension's own functions (only memory.has_permission may be named)",
    )
    _, alice = member()
    assert alice.rows(LIST, org) == []


def test_naming_the_default_is_the_default(service, member, org):
    assert service.value(CONFIGURE, '"memory.has_permission"') == (
        "memory.has_permission(uuid,uuid,text)"
    )
    _, alice = member()
    assert alice.rows(LIST, org) == []
    assert (
        service.value("SELECT count(*) FROM pg_proc WHERE proname = '_permission_check_call'") == 0
    )


# ---------------------------------------------------------------- 5: imported messages


def _message(owner: uuid.UUID, chat: str, mid: str, content: str) -> dict[str, Any]:
    return {"id": mid, "chat_id": chat, "owner_id": str(owner), "role": "user", "content": content}


def _export(**parts: Any) -> dict[str, Any]:
    return {
        "format": "pgmemory",
        "version": 1,
        "namespace": {"scope": "user"},
        "files": [],
        "facts": [],
        "messages": [],
        **parts,
    }


def _exported_message(chat: str, mid: str, content: str) -> dict[str, Any]:
    return {
        "id": mid,
        "chat_id": chat,
        "role": "user",
        "content": content,
        "embedding": None,
        "embedding_model": None,
        "created_at": "2025-05-01T10:00:00+00:00",
        "indexed_at": "2025-05-01T10:00:00+00:00",
    }


def test_a_user_cannot_import_messages(member, org, db):
    _, alice = member()
    before = snapshot(db)
    data = _export(messages=[_exported_message("chat-b", "m-1", "planted")])
    assert alice.fails(IMPORT, org, data, {}) == Failure(
        "42501",
        "MEMORY_FORBIDDEN",
        "not permitted: only the service may import messages"
        ' (import as the service with owner_id, or leave "messages" empty)',
    )
    assert snapshot(db) == before
    assert db.execute("SELECT count(*) FROM memory.messages").fetchone() == (0,)


def test_imported_messages_never_block_or_shadow_another_users(service, member, org):
    alice_id, _ = member()
    bob_id, bob = member()
    # An export handed in by Alice carries Bob's chat and message ids; the service imports it.
    data = _export(messages=[_exported_message("chat-bob", "m-1", "planted by alice")])
    assert service.value(IMPORT, org, data, {"owner_id": str(alice_id)}) == {
        "files": 0,
        "facts": 0,
        "messages": 1,
    }
    # Bob's real message is indexed all the same, and only Bob's is Bob's.
    assert (
        service.value(
            "SELECT memory.index_message(%s, %s)",
            org,
            _message(bob_id, "chat-bob", "m-1", "the real message from bob"),
        )
        is True
    )
    assert [
        r[0] for r in bob.rows("SELECT content FROM memory.search_messages(%s, 'message')", org)
    ] == ["the real message from bob"]
    # The other way round: an import after Bob's message exists succeeds the same way.
    again = _export(messages=[_exported_message("chat-bob", "m-2", "also planted")])
    service.value(
        "SELECT memory.index_message(%s, %s)", org, _message(bob_id, "chat-bob", "m-2", "bob two")
    )
    assert service.value(IMPORT, org, again, {"owner_id": str(alice_id)})["messages"] == 1
    assert sorted(
        r[0]
        for r in bob.rows("SELECT content FROM memory.search_messages(%s, 'bob', k => 10)", org)
    ) == ["bob two", "the real message from bob"]


# ---------------------------------------------------------------- 6: view of a long file


def test_viewing_a_100000_line_file_is_linear(service, org):
    """A bound, not a benchmark (bench/view.py measures): quadratic numbering took ~17 s here."""
    ns = {"owner_id": str(uuid.uuid4())}
    content = "\n" * 99_999  # 100,000 lines, within max_content
    service.run(org, {"command": "create", "path": "/memories/long.md", "file_text": content}, ns)
    service.rows("SET statement_timeout = '5s'")
    header = "Here's the content of /memories/long.md with line numbers:\n"
    shown = (16_000 - len(header) - 200) // 8
    view = service.run(org, {"command": "view", "path": "/memories/long.md"}, ns)
    assert view == (
        header
        + "\n".join(f"{n:>6}\t" for n in range(1, shown + 1))
        + f"\n[Output truncated at 16000 characters: showing lines 1-{shown} of 100000."
        " Use view_range to see the other lines.]"
    )
    tail = service.run(
        org, {"command": "view", "path": "/memories/long.md", "view_range": [99_998, -1]}, ns
    )
    assert tail == header + " 99998\t\n 99999\t\n100000\t"


# ---------------------------------------------------------------- 7: source size


def _source(total_bytes: int) -> dict[str, str]:
    source = {"k": "x" * (total_bytes - len('{"k": ""}'))}
    assert len(json.dumps(source)) == total_bytes
    return source


TOO_LARGE_SOURCE = Failure(
    "54000", "MEMORY_TOO_LARGE", "Fact source is 16385 bytes of JSON, over the limit of 16384 bytes"
)


def test_a_fact_source_is_at_most_16_kib(service, org, db):
    ns = {"owner_id": str(uuid.uuid4())}
    save = "SELECT memory.save_fact(%s, %s, NULL, %s, %s)"
    assert service.value(save, org, "fits", ns, _source(16_384)) is not None
    before = snapshot(db), db.execute("SELECT count(*) FROM memory.facts").fetchone()
    assert service.fails(save, org, "too much", ns, _source(16_385)) == TOO_LARGE_SOURCE
    batch = [{"content": "first"}, {"content": "second", "source": _source(16_385)}]
    assert service.fails("SELECT * FROM memory.save_facts(%s, %s, %s)", org, batch, ns) == (
        TOO_LARGE_SOURCE
    )
    fact = {
        "id": str(uuid.uuid4()),
        "content": "imported",
        "version": 1,
        "source": _source(16_385),
        "embedding": None,
        "created_at": "2025-05-01T10:00:00+00:00",
        "updated_at": "2025-05-01T10:00:00+00:00",
    }
    assert service.fails(IMPORT, org, _export(facts=[fact]), ns) == TOO_LARGE_SOURCE
    assert (snapshot(db), db.execute("SELECT count(*) FROM memory.facts").fetchone()) == before


# ---------------------------------------------------------------- 8: existence never leaks


def _missing(fact_id: Any) -> Failure:
    return Failure("P0002", "MEMORY_NOT_FOUND", f"fact {fact_id} does not exist")


BY_ID = [
    ("SELECT memory.get_fact(%s, %s)", ()),
    ("SELECT memory.forget(%s, %s)", ()),
    ("SELECT memory.edit_fact(%s, %s, 'mine now')", ()),
]


@pytest.mark.parametrize(("query", "extra"), BY_ID, ids=["get_fact", "forget", "edit_fact"])
def test_other_peoples_fact_ids_answer_like_random_ones(service, member, org, db, query, extra):
    other_org = uuid.uuid4()
    bob_id, _ = member("memory.read", organization=other_org)
    theirs = {
        "another org's user": service.value(
            "SELECT memory.save_fact(%s, 'bob, elsewhere', NULL, %s)",
            other_org,
            {"owner_id": str(bob_id)},
        ),
        "another org's shared": service.value(
            "SELECT memory.save_fact(%s, 'org two shared', NULL, %s)",
            other_org,
            {"scope": "organization"},
        ),
        "same org, another user": service.value(
            "SELECT memory.save_fact(%s, 'carol', NULL, %s)", org, {"owner_id": str(uuid.uuid4())}
        ),
    }
    # An attacker with every permission in their own org, and an admin of the other org.
    _, attacker = member("memory.read", "memory.manage")
    _, admin = member("memory.read", "memory.manage", organization=other_org)
    before = (
        snapshot(db),
        db.execute("SELECT to_jsonb(f)::text FROM memory.facts f ORDER BY 1").fetchall(),
    )
    random_id = uuid.uuid4()
    # In their own organization: a random id, another org's and another user's all missing.
    assert attacker.fails(query, org, random_id) == _missing(random_id)
    for fact_id in theirs.values():
        assert attacker.fails(query, org, fact_id) == _missing(fact_id)
    # Naming the other organization: refused before any id is looked at.
    for fact_id in (random_id, *theirs.values()):
        assert attacker.fails(query, other_org, fact_id) == NO_READ
    # The other org's admin: its users' facts are theirs alone; this org is closed to them.
    for fact_id in (random_id, theirs["another org's user"]):
        assert admin.fails(query, other_org, fact_id) == _missing(fact_id)
    for fact_id in (random_id, theirs["same org, another user"]):
        assert admin.fails(query, org, fact_id) == NO_READ
    after = (
        snapshot(db),
        db.execute("SELECT to_jsonb(f)::text FROM memory.facts f ORDER BY 1").fetchall(),
    )
    assert after == before


def test_importing_someone_elses_fact_id_answers_like_a_random_one(service, member, org):
    other_org = uuid.uuid4()
    taken = {
        "another org": service.value(
            "SELECT memory.save_fact(%s, 'elsewhere', NULL, %s)",
            other_org,
            {"owner_id": str(uuid.uuid4())},
        ),
        "same org, another user": service.value(
            "SELECT memory.save_fact(%s, 'carol', NULL, %s)", org, {"owner_id": str(uuid.uuid4())}
        ),
        "nobody": uuid.uuid4(),
    }
    _, alice = member()
    answers = {}
    for who, fact_id in taken.items():
        fact = {
            "id": str(fact_id),
            "content": f"imported over {who}",
            "version": 1,
            "source": None,
            "embedding": None,
            "created_at": "2025-05-01T10:00:00+00:00",
            "updated_at": "2025-05-01T10:00:00+00:00",
        }
        answers[who] = alice.value(IMPORT, org, _export(facts=[fact]), {})
    assert answers == {who: {"files": 0, "facts": 1, "messages": 0} for who in taken}
    # The owners' facts are untouched; Alice's got ids of their own.
    mine = alice.value(EXPORT, org, {})["facts"]
    assert sorted(f["content"] for f in mine) == sorted(f"imported over {w}" for w in taken)
    assert not {f["id"] for f in mine} & {str(i) for i in taken.values()}
    assert service.value("SELECT memory.get_fact(%s, %s)", other_org, taken["another org"])[
        "content"
    ] == ("elsewhere")


# ---------------------------------------------------------------- 9: versions


def _file(version: Any) -> dict[str, Any]:
    return {
        "path": "/memories/notes.md",
        "content": "a\nb\n",
        "version": version,
        "created_at": "2025-05-01T10:00:00+00:00",
        "updated_at": "2025-05-01T10:00:00+00:00",
    }


def _fact(version: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "content": "a fact",
        "version": version,
        "source": None,
        "embedding": None,
        "created_at": "2025-05-01T10:00:00+00:00",
        "updated_at": "2025-05-01T10:00:00+00:00",
    }


@pytest.mark.parametrize("version", [2**63 - 1, MAX_VERSION + 1, 0, -1, 1.5, "3", None], ids=repr)
def test_import_refuses_versions_no_history_reaches(service, member, org, db, version):
    manager_id, _ = member("memory.read", "memory.manage")
    shown = json.dumps(version)
    before = snapshot(db)
    for ns in ({"scope": "organization"}, {"owner_id": str(manager_id)}):
        assert service.fails(IMPORT, org, _export(files=[_file(version)]), ns) == Failure(
            "22023",
            "MEMORY_INVALID",
            f"file version must be an integer from 1 to 9007199254740991, got {shown}",
        )
        assert service.fails(IMPORT, org, _export(facts=[_fact(version)]), ns) == Failure(
            "22023",
            "MEMORY_INVALID",
            f"fact version must be an integer from 1 to 9007199254740991, got {shown}",
        )
    assert snapshot(db) == before


def test_every_edit_after_the_largest_imported_version_succeeds(service, member, org):
    _, manager = member("memory.read", "memory.manage")
    shared = {"scope": "organization"}
    fact = _fact(MAX_VERSION)
    assert manager.value(
        IMPORT, org, _export(files=[_file(MAX_VERSION)], facts=[fact]), shared
    ) == {
        "files": 1,
        "facts": 1,
        "messages": 0,
    }
    edit = {"command": "str_replace", "path": "/memories/notes.md", "old_str": "a", "new_str": "c"}
    assert manager.run(org, edit, shared).startswith("The memory file has been edited.")
    assert manager.value(
        "SELECT memory.write(%s, '/memories/notes.md', 'd', %s, %s)", org, MAX_VERSION + 1, shared
    ) == {"path": "/memories/notes.md", "version": MAX_VERSION + 2}
    rename = {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/n.md"}
    assert (
        manager.run(org, rename, shared)
        == "Successfully renamed /memories/notes.md to /memories/n.md"
    )
    fact_id = service.value(
        "SELECT id FROM memory.facts WHERE organization_id = %s AND content = 'a fact'", org
    )
    assert manager.value("SELECT memory.edit_fact(%s, %s, 'an edited fact')", org, fact_id) == (
        MAX_VERSION + 1
    )


# ---------------------------------------------------------------- 10: malformed claims


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        (
            '{"sub": "\\u0000", "role": "authenticated"}',
            "not authenticated: request.jwt.claims is not valid JSON:"
            " unsupported Unicode escape sequence",
        ),
        (
            '{"role": "authenticated\\u0000", "sub": "' + str(uuid.UUID(int=1)) + '"}',
            "not authenticated: request.jwt.claims is not valid JSON:"
            " unsupported Unicode escape sequence",
        ),
        (
            "[" * 100_000 + "]" * 100_000,
            "not authenticated: request.jwt.claims is nested too deeply to be claims",
        ),
        (
            '{"sub": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "not authenticated: request.jwt.claims is nested too deeply to be claims",
        ),
        (
            '{"sub": 42, "role": "authenticated"}',
            "not authenticated: the claims' sub is not a uuid: 42",
        ),
    ],
    ids=["nul in sub", "nul in role", "deep array", "deep sub", "numeric sub"],
)
def test_malformed_claims_are_forbidden_with_the_reason(as_, org, claims, message):
    assert as_(claims).fails(LIST, org) == Failure("42501", "MEMORY_FORBIDDEN", message)


def test_a_sub_is_one_user_however_its_uuid_is_spelled(service, as_, org):
    user_id = uuid.uuid4()
    service.rows("SELECT memory.grant(%s, %s, 'memory.read')", org, user_id)
    create = {"command": "create", "path": "/memories/a.md", "file_text": "x\n"}
    as_(user_claims(str(user_id).upper())).run(org, create)
    for spelling in (str(user_id), user_id.hex, user_id.hex.upper()):
        assert as_({"sub": spelling, "role": "authenticated"}).rows(LIST, org)[0][0] == (
            "/memories/a.md"
        )


# ---------------------------------------------------------------- other settings that name objects


def test_text_search_config_is_stored_qualified_and_never_temporary(db, service, as_, org):
    db.execute("CREATE TEXT SEARCH CONFIGURATION public.app_english (COPY = pg_catalog.english)")
    db.commit()
    set_config = "SELECT memory.configure('text_search_config', %s::jsonb)"
    assert service.value(set_config, '"pg_catalog.english"') == "english"
    # Not visible on the functions' pinned path: kept qualified, so no schema can shadow it.
    assert service.value(set_config, '"public.app_english"') == "public.app_english"
    service.rows("CREATE TEXT SEARCH CONFIGURATION pg_temp.planted (COPY = pg_catalog.simple)")
    temp_schema = service.value("SELECT nspname FROM pg_namespace WHERE oid = pg_my_temp_schema()")
    for name in ("pg_temp.planted", f"{temp_schema}.planted"):
        assert service.fails(set_config, json.dumps(name)) == Failure(
            "22023",
            "MEMORY_INVALID",
            "setting text_search_config may not name a configuration in a temporary schema",
        )
    assert service.value("SELECT memory.setting('text_search_config')") == "public.app_english"
    # A user's own look-alike in their temporary schema is not the one facts are indexed with.
    user = as_(user_claims(uuid.uuid4()))
    service.rows("SELECT memory.grant(%s, %s, 'memory.read')", org, json.loads(user.claims)["sub"])
    user.rows("CREATE TEXT SEARCH CONFIGURATION pg_temp.app_english (COPY = pg_catalog.simple)")
    user.value("SELECT memory.save_fact(%s, 'Running every morning')", org)
    assert (
        service.value("SELECT search_text::text FROM memory.facts") == "'everi':2 'morn':3 'run':1"
    )


def test_a_service_role_setting_is_a_name_never_code(db, service, as_, login_dsn, org):
    odd = "memory_service'; ALTER ROLE memory_web SUPERUSER; --"
    assert (
        service.value("SELECT memory.configure('service_role', %s::jsonb)", json.dumps(odd)) == odd
    )
    app = as_("", login_dsn(SERVICE_LOGIN))  # a member of memory_service, no longer the service
    failure = app.fails(LIST, org)
    assert (failure.sqlstate, failure.hint) == ("42501", "MEMORY_FORBIDDEN")
    assert failure.message.startswith(
        f"this login is not the service: not a superuser nor a member of role {odd}, which does"
        " not exist yet"
    )
    assert db.execute("SELECT rolsuper FROM pg_roles WHERE rolname = 'memory_web'").fetchone() == (
        False,
    )


def test_the_documented_plugin_is_accepted_and_does_what_it_says(
    db, attacker, service, as_, org, login_dsn
):
    """docs/supabase.md's plug-in, created by an ordinary role as on hosted Supabase."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "supabase.md").read_text()
    block = next(b for b in doc.split("```sql")[1:] if "app.memory_permission" in b)
    sql = block.split("```")[0]
    create, configure = sql.split("SELECT memory.configure(")
    # The doc's first line creates schema app; here the superuser gives it to the role.
    schema_line = re.compile(r"^CREATE SCHEMA IF NOT EXISTS app;.*$", re.M)
    assert schema_line.search(create), create
    create = schema_line.sub("", create)
    db.execute(f"CREATE SCHEMA app AUTHORIZATION {attacker.role}")
    db.commit()
    attacker.sql(create)  # the app's own role owns the table and the definer function
    assert service.value("SELECT memory.configure(" + configure.strip().rstrip(";")) == (
        "app.memory_permission(uuid,uuid,text)"
    )
    viewer, member, admin = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    attacker.sql(
        "INSERT INTO app.memberships VALUES "
        f"('{org}', '{viewer}', 'viewer'), ('{org}', '{member}', 'member'), ('{org}', '{admin}', 'admin')"
    )
    shared = {"scope": "organization"}
    note = {"command": "create", "path": "/memories/team.md", "file_text": "standup at 9\n"}
    assert as_(user_claims(viewer)).fails(LIST, org) == NO_READ
    assert as_(user_claims(member)).rows(LIST, org) == []
    assert as_(user_claims(member)).run_fails(org, note, shared) == Failure(
        "42501",
        "MEMORY_FORBIDDEN",
        "not permitted: changing organization memory needs the manage permission",
    )
    assert as_(user_claims(admin)).run(org, note, shared) == (
        "File created successfully at: /memories/team.md"
    )
    assert attacker.is_superuser() is False


def test_import_takes_a_whole_version_written_with_a_fraction(service, member, org):
    """A JSON writer's 3.0 is the version 3, as 3 is."""
    _, manager = member("memory.read", "memory.manage")
    shared = {"scope": "organization"}
    fact = _fact(3.0)
    assert manager.value(IMPORT, org, _export(files=[_file(3.0)], facts=[fact]), shared) == {
        "files": 1,
        "facts": 1,
        "messages": 0,
    }
    assert service.rows(
        "SELECT version FROM memory.facts WHERE organization_id = %s AND content = 'a fact'", org
    ) == [(3,)]
    assert manager.value(
        "SELECT memory.write(%s, '/memories/notes.md', 'd', 3, %s)", org, shared
    ) == {"path": "/memories/notes.md", "version": 4}
