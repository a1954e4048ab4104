"""The SQL that `pgmemory install --pg-tle` sends (pgmemory.pgtle), without pg_tle.

pg_tle is not installed here. What is tested is our side: the exact statements
for the real scripts (functions, argument literals, order), each script body
unquoted by a real PostgreSQL (`SELECT <literal>`) and compared byte for byte
with the assembled script, the dollar-quote tag that must not collide with the
body, the error when pg_tle is missing, and `install()` against a stub schema
`pgtle` whose functions have pg_tle's signatures and store each script as pg_tle
does (a function `pgtle."memory--<version>.sql"()` returning it) and record
their arguments. The stub proves the statements execute and pass the bodies
through intact; it says nothing about pg_tle itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import psycopg
import pytest

from pgmemory import install as files_install
from pgmemory import pgtle
from pgmemory.install import InstallError

VERSION, FILES = files_install.extension_files()
COMMENT = re.findall(r"^comment = '(.*)'$", FILES["memory.control"].decode(), re.M)[0]
GUARDS = {
    "full": '\\echo Use "CREATE EXTENSION memory" to load this file. \\quit',
    "upgrade": '\\echo Use "ALTER EXTENSION memory UPDATE" to load this file. \\quit',
}


def expected_body(name: str, vector_schema: str) -> str:
    """The assembled script without its guard line (the second line), pgvector's schema named."""
    lines = FILES[name].decode().split("\n")
    assert lines[1] == GUARDS["upgrade" if name.count("--") == 2 else "full"], lines[1]
    return "\n".join([lines[0], *lines[2:]]).replace("@extschema:vector@", f'"{vector_schema}"')


def versions(name: str) -> list[str]:
    return name.removeprefix("memory--").removesuffix(".sql").split("--")


def expected_calls() -> list[tuple[str, list[str]]]:
    """(function, leading literal arguments) of each statement, in the order they must come."""
    released = sorted(
        versions(n)[0] for n in FILES if n.count("--") == 1 and versions(n)[0] != VERSION
    )
    calls = [("install_extension", ["memory", v, COMMENT]) for v in [*released, VERSION]]
    calls += [
        ("install_update_path", ["memory", *versions(n)])
        for n in sorted(n for n in FILES if n.count("--") == 2)
    ]
    return [*calls, ("set_default_version", ["memory", VERSION])]


def tokens(args: str) -> list[str]:
    """Split an argument list into its literals: '…', $tag$…$tag$, ARRAY[…]."""
    out, i = [], 0
    while i < len(args):
        if args[i] == "$":
            tag = re.compile(r"\$\w*\$").match(args, i)
            assert tag, args[i : i + 40]
            end = args.index(tag.group(), tag.end()) + len(tag.group())
        else:
            found = re.compile(r"'(?:[^']|'')*'|ARRAY\[[^\]]*\]").match(args, i)
            assert found, args[i : i + 40]
            end = found.end()
        out.append(args[i:end])
        i = end
        if i < len(args):
            assert args[i : i + 2] == ", ", args[i : i + 40]
            i += 2
    return out


def parse(stmt: str) -> tuple[str, list[str]]:
    found = re.fullmatch(r"SELECT pgtle\.(\w+)\((.*)\)", stmt, re.S)
    assert found, stmt[:200]
    return found.group(1), tokens(found.group(2))


def unquote(conn: psycopg.Connection, token: str) -> str:
    row = conn.execute(f"SELECT {token}".encode()).fetchone()
    assert row is not None
    return row[0]


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


def test_the_statements_for_the_real_scripts(conn: psycopg.Connection) -> None:
    stmts = pgtle.statements(vector_schema="extensions")
    parsed = [parse(s) for s in stmts]
    calls = expected_calls()
    assert [(fn, len(args)) for fn, args in parsed] == [
        (fn, {"install_extension": 5, "install_update_path": 4, "set_default_version": 2}[fn])
        for fn, _ in calls
    ]
    assert (
        calls[0][1][1] == "0.1.0" and ("install_update_path", ["memory", "0.1.0", VERSION]) in calls
    )
    for (fn, args), (want_fn, want_args) in zip(parsed, calls, strict=True):
        assert fn == want_fn
        leading = args[: len(want_args)]
        assert leading == ["'" + a.replace("'", "''") + "'" for a in want_args], (fn, leading)
        assert [unquote(conn, a) for a in leading] == want_args
        if fn == "set_default_version":
            continue
        body = args[len(want_args)]
        assert body.startswith("$pgmemory_1$"), body[:30]  # the scripts do not hold the first tag
        in_name = want_args[1:-1] if fn == "install_extension" else want_args[1:]
        name = "memory--" + "--".join(in_name) + ".sql"
        got = unquote(conn, body)
        assert got == expected_body(name, "extensions"), name
        assert "@extschema:" not in got and "\\echo" not in got
        if fn == "install_extension":
            assert args[4] == "ARRAY['vector']"


def test_a_body_holding_the_first_tag_is_quoted_with_another(conn: psycopg.Connection) -> None:
    for body, tag in [
        ("SELECT 1; -- $pgmemory_1$ in a comment\n", "$pgmemory_2$"),
        ("ends in the start of the tag: $pgmemory_1", "$pgmemory_2$"),
        ("$pgmemory_1$ and $pgmemory_2$, $$ $q$", "$pgmemory_3$"),
        ("", "$pgmemory_1$"),
        ("$", "$pgmemory_1$"),
    ]:
        quoted = pgtle.quote(body)
        assert quoted.startswith(tag) and quoted.endswith(tag), (body, quoted[:20])
        assert unquote(conn, quoted) == body

    files = dict(FILES)
    name = f"memory--{VERSION}.sql"
    files[name] = files[name] + b"-- a script that mentions $pgmemory_1$\n"
    stmt = next(
        s
        for s in pgtle.statements(files, VERSION, vector_schema="public")
        if f"'{VERSION}', '" in s
    )
    fn, args = parse(stmt)
    assert fn == "install_extension" and args[3].startswith("$pgmemory_2$")
    assert unquote(conn, args[3]) == expected_body(f"memory--{VERSION}.sql", "public") + (
        "-- a script that mentions $pgmemory_1$\n"
    )


def test_pg_tle_delimiters_in_a_script_are_refused() -> None:
    files = dict(FILES)
    name = f"memory--{VERSION}.sql"
    files[name] = files[name] + b"SELECT $_pgtle_i_$ x $_pgtle_i_$;\n"
    with pytest.raises(InstallError, match=r"memory--.*\.sql contains \$_pgtle_i_\$"):
        pgtle.statements(files, VERSION, vector_schema="public")


def test_without_pg_tle_install_says_what_to_do(conn: psycopg.Connection) -> None:
    with pytest.raises(InstallError) as err:
        pgtle.install(conn)
    message = str(err.value)
    assert "CREATE EXTENSION pg_tle" in message and "shared_preload_libraries" in message
    assert "pgmemory install --plain" in message
    assert conn.execute("SELECT to_regnamespace('pgtle')").fetchone() == (None,)


# --------------------------------------------------------------------------- a stub pg_tle

STUB = r"""
CREATE SCHEMA pgtle;
CREATE TABLE pgtle.calls (n serial PRIMARY KEY, fn text NOT NULL, args text[] NOT NULL);

-- pg_tle keeps each script as a function pgtle."<name>--<version>.sql"() returning it,
-- refuses its own delimiters, and fails on a script it already holds.
CREATE FUNCTION pgtle._store(fname text, body text, replace boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF strpos(body, '$_pgtle_o_$') > 0 OR strpos(body, '$_pgtle_i_$') > 0 THEN
        RAISE EXCEPTION 'invalid character in extension definition';
    END IF;
    EXECUTE format('CREATE %s FUNCTION pgtle.%I() RETURNS text LANGUAGE sql AS %L',
                   CASE WHEN replace THEN 'OR REPLACE' ELSE '' END, fname,
                   'SELECT ' || quote_literal(body));
END $$;

CREATE FUNCTION pgtle.install_extension(name text, version text, description text, ext text,
                                        requires text[] DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgtle.calls (fn, args)
    VALUES ('install_extension', ARRAY[name, version, description, ext, requires::text]);
    PERFORM pgtle._store(name || '--' || version || '.sql', ext, false);
    PERFORM pgtle._store(name || '.control', format('default_version = %L', version), true);
    RETURN true;
END $$;

CREATE FUNCTION pgtle.install_update_path(name text, fromvers text, tovers text, ext text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgtle.calls (fn, args)
    VALUES ('install_update_path', ARRAY[name, fromvers, tovers, ext]);
    PERFORM pgtle._store(name || '--' || fromvers || '--' || tovers || '.sql', ext, false);
    RETURN true;
END $$;

CREATE FUNCTION pgtle.set_default_version(name text, version text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgtle.calls (fn, args) VALUES ('set_default_version', ARRAY[name, version]);
    IF to_regprocedure(format('pgtle.%I()', name || '--' || version || '.sql')) IS NULL THEN
        RAISE EXCEPTION 'extension and version do not exist';
    END IF;
    PERFORM pgtle._store(name || '.control', format('default_version = %L', version), true);
    RETURN true;
END $$;
"""


@pytest.fixture
def stub(conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch) -> psycopg.Connection:
    """This test's database with the stub `pgtle` schema; pg_tle counts as installed."""
    conn.execute(STUB)
    monkeypatch.setattr(pgtle, "pg_tle_version", lambda conn: "stub")
    return conn


def calls(conn: psycopg.Connection) -> list[tuple[str, list[str]]]:
    return [(fn, args) for fn, args in conn.execute("SELECT fn, args FROM pgtle.calls ORDER BY n")]


def test_install_sends_every_script_intact(stub: psycopg.Connection) -> None:
    assert pgtle.install(stub) == VERSION
    made = calls(stub)
    assert [
        (fn, args[: len(want)])
        for (fn, args), (_, want) in zip(made, expected_calls(), strict=True)
    ] == expected_calls()
    for fn, args in made:
        if fn == "install_extension":
            assert args[3] == expected_body(f"memory--{args[1]}.sql", "public")
            assert args[4] == "{vector}"
        elif fn == "install_update_path":
            assert args[3] == expected_body(f"memory--{args[1]}--{args[2]}.sql", "public")
    held = pgtle.registered(stub)
    assert sorted(held) == sorted(n for n in FILES if n.endswith(".sql"))
    assert all(body == expected_body(n, "public") for n, body in held.items())


def test_installing_again_adds_only_what_is_missing(stub: psycopg.Connection) -> None:
    pgtle.install(stub)
    before = len(calls(stub))
    assert pgtle.install(stub) == VERSION
    assert calls(stub)[before:] == [("set_default_version", ["memory", VERSION])]

    # A database registered by a pgmemory that knew only 0.1.0 gets the rest.
    stub.execute("DROP SCHEMA pgtle CASCADE")
    stub.execute(STUB)
    old = pgtle.statements(
        {
            "memory.control": FILES["memory.control"],
            "memory--0.1.0.sql": FILES["memory--0.1.0.sql"],
        },
        "0.1.0",
        vector_schema="public",
    )
    for stmt in old:
        stub.execute(stmt.encode())
    before = len(calls(stub))
    pgtle.install(stub)
    added = [(fn, args[:3]) for fn, args in calls(stub)[before:]]
    assert ("install_extension", ["memory", "0.1.0", COMMENT]) not in added
    assert added == [
        c for c in expected_calls() if c != ("install_extension", ["memory", "0.1.0", COMMENT])
    ]


def test_a_script_registered_differently_is_refused(stub: psycopg.Connection) -> None:
    stub.execute(
        "SELECT pgtle.install_extension('memory', %s, 'x', 'SELECT 1;', ARRAY['vector'])",
        (VERSION,),
    )
    before = calls(stub)
    with pytest.raises(
        InstallError, match=re.escape(f"pgtle.uninstall_extension('memory', '{VERSION}')")
    ):
        pgtle.install(stub)
    assert calls(stub) == before


def test_it_is_one_transaction(stub: psycopg.Connection) -> None:
    stub.execute(
        "CREATE OR REPLACE FUNCTION pgtle.set_default_version(name text, version text)"
        " RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$"
    )
    with pytest.raises(psycopg.errors.RaiseException, match="refused"):
        pgtle.install(stub)
    assert calls(stub) == [] and pgtle.registered(stub) == {}


def test_pgvector_must_be_there_first(stub: psycopg.Connection) -> None:
    stub.execute("DROP EXTENSION vector CASCADE")
    with pytest.raises(InstallError, match="pgvector is not installed in this database"):
        pgtle.install(stub)
