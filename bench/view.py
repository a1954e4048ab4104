"""Viewing long core memory files: time per `view` as the file grows, today's
extension against the view functions before the fix (quadratic in the lines), on the
same server and files. A file may hold up to `max_content` characters (100,000), so up
to 100,000 lines of nothing, and every user with read permission can view it as often
as they like: a view must cost time linear in the file. SECTION (below) is what is
measured and how, as docs/benchmarks.md shows it.

    .venv/bin/python -m bench.view [--quick] [--rounds N]
"""

from __future__ import annotations

import itertools
import math
import time
import uuid
from typing import Any

import psycopg
from bench._common import (
    ORG,
    Result,
    create_database,
    embedded_server,
    fill,
    index,
    new_result,
    options,
    save,
    server_versions,
    spread,
    stat,
    table,
)
from psycopg.types.json import Jsonb

SECTION = """\
## Viewing long files (bench/view.py)

`memory.run` view of files of empty lines (up to 100,000: the longest `max_content` allows): today's extension against a database where the view functions are those before the fix (each line through its subscript), interleaved, each view the first call of a new session, {rounds} rounds; milliseconds, median (min..max). Both sides return the same text. The last column is the cost of 1,000 more lines since the size above: flat when the view is linear, though a few milliseconds of one step are within the spread of a size's rounds. The target reads the order of growth k over the largest tenfold (t ∝ n^k between the whole view of the largest file and of one a tenth its size: 1 when linear, 2 when quadratic; the fixed cost of a call pulls it below 1) and asks k ≤ 1.1.

{tables}Reproduce: `.venv/bin/python -m bench.view` (`--quick`: 1k, 10k, 100k lines)."""

SIZES = (1_000, 3_000, 10_000, 30_000, 100_000)
QUICK_SIZES = (1_000, 10_000, 100_000)
NS = {"owner_id": str(uuid.UUID(int=7))}
RUN = "SELECT memory.run(%s, %s, %s)"
TARGET_MS = 1_000.0  # "a 100,000-line view completes in well under a second"

# The view as it was before the fix, word for word: every line numbered
# through lines[i], and numbered before the view was cut. Installed over
# today's functions in a database of its own, so both sides run memory.run.
BEFORE_SQL = r"""
CREATE OR REPLACE FUNCTION memory._numbered(lines text[], first_number int) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(string_agg(lpad((first_number + i - 1)::text, 6) || E'\t' || lines[i], E'\n' ORDER BY i), '')
    FROM generate_subscripts(lines, 1) i
$$;

CREATE OR REPLACE FUNCTION memory._view_file(file memory.files, raw text, view_range int[]) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lines text[] := memory._lines(file.content);
    total int := cardinality(lines);
    first int := 0;
    last int := total;
    header text := format(E'Here''s the content of %s with line numbers:\n', raw);
    budget int := memory._setting_int('view_max_chars');
    body text;
    shown int;
BEGIN
    IF total > 999999 THEN
        PERFORM memory._fail('MEMORY_TOO_LARGE', format('File %s exceeds maximum line limit of 999,999 lines.', raw));
    END IF;
    IF view_range IS NOT NULL THEN
        -- Python slice semantics of the reference: lines[max(1, start) - 1 : end].
        first := least(greatest(1, view_range[1]) - 1, total);
        last := CASE WHEN view_range[2] = -1 THEN total
                     WHEN view_range[2] < 0 THEN greatest(0, total + view_range[2])
                     ELSE least(view_range[2], total) END;
    END IF;
    lines := lines[first + 1 : last];
    body := memory._numbered(lines, first + 1);
    IF length(header) + length(body) <= budget THEN
        RETURN header || body;
    END IF;
    -- Too long for one view: whole lines up to the budget, then a note
    -- pointing to view_range (each numbered line costs 8 more characters).
    SELECT count(*) INTO shown FROM (
        SELECT sum(length(l) + 8) OVER (ORDER BY i) AS used
        FROM unnest(lines) WITH ORDINALITY AS t(l, i)) u
    WHERE u.used <= budget - length(header) - 200;
    RETURN header || memory._numbered(lines[1 : shown], first + 1)
        || format(E'\n[Output truncated at %s characters: showing lines %s-%s of %s. '
                  'Use view_range to see the other lines.]',
                  budget, first + 1, first + shown, total);
END
$$;
"""

# Three views of each file: the whole file (cut at view_max_chars), its second
# half from the middle on (cut the same way) and its last three lines.
VIEWS = {"whole": "none", "second half": "[n / 2, -1]", "last lines": "[n - 2, -1]"}


def _command(lines: int, view: str) -> dict[str, Any]:
    command: dict[str, Any] = {"command": "view", "path": f"/memories/long-{lines}.md"}
    if view != "whole":
        command["view_range"] = [lines // 2 if view == "second half" else lines - 2, -1]
    return command


def measure(dsns: dict[str, str], sizes: tuple[int, ...], rounds: int) -> list[dict[str, Any]]:
    with psycopg.connect(dsns["before"], autocommit=True) as conn:
        conn.execute(BEFORE_SQL)
    for dsn in dsns.values():
        with psycopg.connect(dsn, autocommit=True) as conn:
            for lines in sizes:
                create = {**_command(lines, "whole"), "command": "create"}
                create["file_text"] = "\n" * (lines - 1)  # the longest file max_content allows
                conn.execute(RUN, (ORG, Jsonb(create), Jsonb(NS)))
    rows = []
    for view in VIEWS:
        for lines in sizes:
            command = Jsonb(_command(lines, view))
            samples: dict[str, list[float]] = {"before": [], "after": []}
            texts: dict[str, str] = {}
            for _ in range(rounds):
                for side, dsn in dsns.items():  # interleaved: both see the same load
                    # A new session each time, as a caller repeating the view would use:
                    # PostgreSQL plans a SQL function's first calls in a session with its
                    # arguments as constants, which is where lines[i] turns quadratic
                    # (a warm session's generic plan hides it).
                    with psycopg.connect(dsn, autocommit=True) as conn:
                        conn.execute("SELECT 1")
                        started = time.perf_counter()
                        texts[side] = conn.execute(RUN, (ORG, command, Jsonb(NS))).fetchone()[0]
                        samples[side].append((time.perf_counter() - started) * 1000)
            assert texts["before"] == texts["after"], (view, lines)
            row = {"view": view, "lines": lines, **{k: stat(v) for k, v in samples.items()}}
            print(
                f"{view:>11} {lines:>7,} lines: before {row['before']['median']:9.1f} ms,"
                f" after {row['after']['median']:7.2f} ms"
            )
            rows.append(row)
    return rows


def main() -> None:
    ap = options(__doc__, "1,000, 10,000 and 100,000 lines")
    ap.add_argument("--rounds", type=int, default=3, help="views per side and size")
    args = ap.parse_args()
    sizes = QUICK_SIZES if args.quick else SIZES
    result = new_result("view", args.quick, rounds=args.rounds, sizes=list(sizes))
    with embedded_server("view") as srv:
        dsns = {side: create_database(srv, f"view_{side}") for side in ("before", "after")}
        result["environment"]["versions"] = server_versions(dsns["after"])
        result["tables"]["views"] = measure(dsns, sizes, args.rounds)
    save(result, args.out)


def _views(r: Result) -> dict[str, dict[int, dict[str, Any]]]:
    return index(r["tables"]["views"], "view", "lines")


def _marginal(r: Result, view: str, side: str) -> list[float]:
    """Milliseconds per 1,000 more lines between consecutive sizes: flat when linear
    (the first call of a session also pays a fixed few milliseconds of planning)."""
    points = [(n, row[side]["median"]) for n, row in _views(r)[view].items()]
    return [(t1 - t0) / (n1 - n0) * 1000 for (n0, t0), (n1, t1) in itertools.pairwise(points)]


def targets(r: Result) -> list[dict[str, Any]]:
    largest = max(r["config"]["sizes"])
    whole, half = (_views(r)[v][largest] for v in ("whole", "second half"))
    after, before = _marginal(r, "whole", "after"), _marginal(r, "whole", "before")
    # The empirical order of growth over the last tenfold: t ~ n^k gives k (1 for a
    # linear view, 2 for the quadratic one before); a fixed cost pulls it under 1.
    decade = max(n for n in r["config"]["sizes"] if n <= largest // 10)
    small = _views(r)["whole"][decade]
    growth = {
        side: math.log(whole[side]["median"] / small[side]["median"]) / math.log(largest / decade)
        for side in ("after", "before")
    }
    return [
        {
            "target": f"a {largest:,}-line view well under a second",
            "measured": f"{whole['after']['median']:.1f} ms whole, {half['after']['median']:.1f} ms"
            f" from its middle on (before: {whole['before']['median']:,.0f} ms and"
            f" {half['before']['median']:,.0f} ms)",
            "met": whole["after"]["median"] < TARGET_MS and half["after"]["median"] < TARGET_MS,
        },
        {
            "target": "view time grows linearly with the file",
            "measured": f"order of growth from {decade:,} to {largest:,} lines"
            f" {growth['after']:.2f} (before: {growth['before']:.2f});"
            " ms per 1,000 more lines, size to size: "
            + ", ".join(f"{m:.2f}" for m in after)
            + " (before: "
            + ", ".join(f"{m:,.0f}" for m in before)
            + ")",
            "met": growth["after"] <= 1.1,
        },
    ]


def markdown(r: Result) -> str:
    tables = []
    for view, by_size in _views(r).items():
        after, before = _marginal(r, view, "after"), _marginal(r, view, "before")
        rows = [
            (
                f"{n:,}",
                spread(row["before"]),
                spread(row["after"]),
                f"{row['before']['median'] / row['after']['median']:,.1f}x",
                "" if i == 0 else f"{before[i - 1]:,.2f} / {after[i - 1]:.3f}",
            )
            for i, (n, row) in enumerate(by_size.items())
        ]
        headers = (
            "lines",
            "before",
            "after",
            "before / after",
            "ms per 1k more lines, before / after",
        )
        tables.append(f"**{view}** (`view_range` {VIEWS[view]}):\n\n{table(headers, rows)}\n\n")
    return fill(SECTION, r["config"], tables="".join(tables))


if __name__ == "__main__":
    main()
