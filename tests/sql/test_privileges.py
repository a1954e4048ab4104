"""Privilege review as tests: read from the catalog, tried as an unprivileged login."""

from __future__ import annotations

import re
import uuid

import psycopg
import pytest

from tests.conftest import USER_LOGIN
from tests.support import Failure, user_claims

PINNED = "search_path=pg_catalog, pg_temp"
ONLY_SERVICE = Failure("42501", "MEMORY_FORBIDDEN", "not permitted: only the service may do this")


def _functions(db: psycopg.Connection) -> list[tuple[str, bool, list[str] | None, str]]:
    return db.execute(
        "SELECT p.oid::regprocedure::text, p.prosecdef, p.proconfig, p.prosrc FROM pg_proc p "
        "WHERE p.pronamespace = 'memory'::regnamespace ORDER BY 1"
    ).fetchall()


def test_every_function_pins_search_path(db):
    functions = _functions(db)
    assert len(functions) > 60
    unpinned = [name for name, _, config, _ in functions if PINNED not in (config or [])]
    assert unpinned == []


def test_only_public_functions_are_security_definer_and_helpers_are_not_callable(db):
    for name, definer, _, _ in _functions(db):
        internal = name.startswith("memory._")
        if definer:
            assert not internal, name
        callable_by_public = db.execute(
            "SELECT has_function_privilege('public', %s, 'EXECUTE')", (name,)
        ).fetchone()[0]
        assert callable_by_public == (
            not internal and name != "memory.has_permission(uuid,uuid,text)"
        ), name


def test_dynamic_sql_is_confined_and_quoted(db):
    """Few functions build SQL at run time: the plug-in binding from a validated
    regprocedure, the jobs over facts and messages from the table names of
    memory._memory_tables(), and the namespaces' own indexes from names derived
    from them; every statement through format(), or through one of the
    builders of an own index's statements (checked here the same way), which
    memory.maintenance_statements() also hands out to be run."""
    dynamic = {
        name: src
        for name, _, _, src in _functions(db)
        if re.search(r"^\s*(RETURN QUERY )?EXECUTE\b", src, re.MULTILINE)
    }
    assert sorted(dynamic) == [
        "memory._bind_permission_check(regprocedure)",
        "memory._count_lexemes(text,uuid,uuid,bigint)",
        "memory._create_namespace_index(text,uuid,uuid)",
        "memory._create_namespace_text_index(text,uuid,uuid)",
        "memory._drop_namespace_indexes()",
        "memory._index_plan(text)",
        "memory._keep_vectors_inline()",
        "memory._measure_namespace_index(text,uuid,uuid,bigint)",
        "memory._rederive_search_text()",
        "memory.configure_embeddings(integer,text)",
        "memory.embedding_status()",
        "memory.maintain()",
        "memory.pending_embeddings(integer)",
        "memory.set_memory_embeddings(uuid[],text[],jsonb,text,real[])",
    ]
    own_index_helpers = (
        "memory._count_lexemes(text,uuid,uuid,bigint)",
        "memory._create_namespace_index(text,uuid,uuid)",
        "memory._create_namespace_text_index(text,uuid,uuid)",
        "memory._drop_namespace_indexes()",
        "memory._index_plan(text)",
        "memory._measure_namespace_index(text,uuid,uuid,bigint)",
    )
    for name, src in dynamic.items():
        if name == "memory._bind_permission_check(regprocedure)":
            continue
        if name in own_index_helpers:  # tables from there, index names from memory._namespace_index
            assert re.search(
                r"memory\._memory_tables\(\)|memory\._namespace_(text_)?index\(", src
            ), name
        else:
            assert "FOR t IN SELECT * FROM memory._memory_tables() LOOP" in src, name
        assert "memory.%" in src or "EXECUTE memory._namespace_index_sql(" in src, name
        assert not re.search(r"memory\.%(?!(\d+\$)?I)", src), name  # a table or index name: %I
    builders = {
        name: src
        for name, _, _, src in _functions(db)
        if name.startswith(
            (
                "memory._namespace_index_sql(",
                "memory._namespace_text_index_sql(",
                "memory._namespace_index_comment_sql(",
                "memory._namespace_predicate_sql(",
            )
        )
    }
    assert len(builders) == 4
    for name, src in builders.items():
        assert src.strip().startswith("SELECT format('"), name
        if name.startswith("memory._namespace_predicate_sql("):  # values only, through %L
            assert re.findall(r"%[^%]", src) == ["%L", "%L"], name
            continue
        assert "memory.%I" in src and not re.search(r"memory\.%(?!I)", src), name
        # %s only for the fixed CONCURRENTLY clause and the predicate built above
        assert not re.search(r"%s(?!%I)", src.replace("WHERE %s'", "")), name
        assert src.count("WHERE %s'") == ("comment" not in name)
        if "comment" not in name:
            assert "memory._namespace_predicate_sql(kind, org, namespace_id))" in src, name
    for src in dynamic.values():
        for line in src.splitlines():
            if re.match(r"\s*(RETURN QUERY )?EXECUTE\b", line):
                assert re.search(
                    r"EXECUTE (format\(|memory\._namespace_(text_)?index_(comment_)?sql\()", line
                ), line
    statements = next(src for name, _, _, src in _functions(db) if "maintenance_statements" in name)
    for line in statements.splitlines():
        if "RETURN NEXT" in line:
            assert re.search(
                r"RETURN NEXT (format\('[^']*memory\.%I|memory\._namespace_(text_)?index_(comment_)?sql\(|"
                r"'SELECT \* FROM memory\.maintain\(\)';)",
                line,
            ), line
    assert (
        "BEGIN ATOMIC SELECT %I.%I($1, $2, $3); END"
        in dynamic["memory._bind_permission_check(regprocedure)"]
    )


def test_no_table_is_reachable_by_other_roles(db):
    tables = [
        r[0]
        for r in db.execute(
            "SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'memory'::regnamespace AND c.relkind = 'r' ORDER BY 1"
        ).fetchall()
    ]
    assert tables == [
        "captures",
        "documents",
        "facts",
        "files",
        "messages",
        "namespace_lexemes",
        "namespaces",
        "permissions",
        "recall_replays",
        "settings",
        "shared_index_namespaces",
    ]
    for table in tables:
        row = db.execute(
            "SELECT c.relrowsecurity, c.relacl IS NULL OR NOT EXISTS ("
            "  SELECT FROM aclexplode(c.relacl) a WHERE a.grantee <> c.relowner) "
            "FROM pg_class c WHERE c.oid = %s::regclass",
            (f"memory.{table}",),
        ).fetchone()
        assert row == (True, True), table


SERVICE_ONLY_CALLS = [
    ("SELECT memory.configure('max_render', '100')", ()),
    ("SELECT memory.grant(%s, %s, 'memory.read')", ("ORG", "USER")),
    ("SELECT memory.revoke(%s, %s, 'memory.read')", ("ORG", "USER")),
    ("SELECT memory.configure_embeddings(8)", ()),
    ("SELECT * FROM memory.pending_embeddings(1)", ()),
    ("SELECT memory.embedding_status()", ()),
    ("SELECT memory.set_memory_embeddings('{}'::uuid[], '{}'::text[], '[]'::jsonb)", ()),
    ("SELECT memory.index_message(%s, '{}'::jsonb)", ("ORG",)),
    ("SELECT memory.document_read('s', 'p')", ()),
    ("SELECT memory.document_write('s', 'p', 'c', NULL)", ()),
    ("SELECT memory.document_delete('s', 'p', NULL)", ()),
    ("SELECT * FROM memory.document_list('s')", ()),
    ("SELECT memory.purge_documents()", ()),
    ("SELECT memory.erase_user(%s, %s)", ("ORG", "USER")),
]


@pytest.mark.parametrize(
    ("query", "args"), SERVICE_ONLY_CALLS, ids=[q for q, _ in SERVICE_ONLY_CALLS]
)
def test_unprivileged_login_cannot_call_service_functions(
    as_, login_dsn, service, org, query, args
):
    user = uuid.uuid4()
    service.rows("SELECT memory.grant(%s, %s, 'memory.read')", org, user)
    service.rows("SELECT memory.grant(%s, %s, 'memory.manage')", org, user)
    web = as_(user_claims(user), login_dsn(USER_LOGIN))
    params = tuple(org if a == "ORG" else user if a == "USER" else a for a in args)
    assert web.fails(query, *params) == ONLY_SERVICE
    # Forged service claims from an untrusted login do not help either.
    forged = as_({"role": "service_role", "sub": str(user)}, login_dsn(USER_LOGIN))
    assert forged.fails(query, *params) == Failure(
        "42501", "MEMORY_FORBIDDEN", "not permitted: this login may not act as the service"
    )


def test_attacker_objects_in_public_and_pg_temp_do_not_hijack(db, as_, login_dsn, service, org):
    """Look-alike functions, operators and tables planted where an unpinned path would find them."""
    db.execute(f"GRANT CREATE ON SCHEMA public TO {USER_LOGIN}")
    db.commit()
    user = uuid.uuid4()
    service.rows("SELECT memory.grant(%s, %s, 'memory.read')", org, user)
    web = as_(user_claims(user), login_dsn(USER_LOGIN))
    web.rows(
        "CREATE FUNCTION public.md5(text) RETURNS text LANGUAGE sql AS $$ SELECT 'hijacked' $$;"
        "CREATE FUNCTION public.starts_with(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;"
        "CREATE FUNCTION public.replace(text, text, text) RETURNS text LANGUAGE sql AS $$ SELECT 'hijacked' $$;"
        "CREATE FUNCTION public.lpad(text, integer) RETURNS text LANGUAGE sql AS $$ SELECT 'hijacked' $$;"
        "CREATE TEMP TABLE files (organization_id uuid, namespace_id uuid, path text, content text);"
        "CREATE TEMP TABLE permissions (organization_id uuid, user_id uuid, permission text);"
    )
    web.rows("SET search_path = pg_temp, public, pg_catalog")
    assert web.run(org, {"command": "create", "path": "/memories/a.md", "file_text": "safe\n"}) == (
        "File created successfully at: /memories/a.md"
    )
    assert web.run(org, {"command": "view", "path": "/memories/a.md"}) == (
        "Here's the content of /memories/a.md with line numbers:\n     1\tsafe\n     2\t"
    )
    assert web.value("SELECT count(*) FROM files") == 0  # the planted table saw nothing
    assert service.value("SELECT content FROM memory.files") == "safe\n"


def test_permission_check_cannot_name_something_else(service):
    for value in ('"memory.has_permission(uuid,uuid,text); DROP TABLE memory.files"', '"pg_sleep"'):
        failure = service.fails("SELECT memory.configure('permission_check', %s::jsonb)", value)
        assert (failure.sqlstate, failure.hint) == ("22023", "MEMORY_INVALID")
    assert service.value("SELECT count(*) FROM memory.files") == 0
