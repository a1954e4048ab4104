"""Viewing long core memory files: time per `view` as the file grows.

A file may hold up to `max_content` characters (100,000), so up to 100,000
lines of nothing. Every user with read permission can view it as often as
they like, so a view must cost time linear in the file, not quadratic.

Two sides on the same server and the same files, interleaved per round:

- `before`: the numbering as it was, installed here in a scratch schema
  (each line fetched by its subscript, `lines[i]`, which walks the array from
  its start: quadratic), numbering every line before cutting the view;
- `after`: today's `memory.run` view (one pass over the lines, only the lines
  shown are numbered), end to end through the memory function.

Both are checked to give the same text. Reported: median and spread of the
time per view, per 1,000 lines (flat when linear), and before/after.

    .venv/bin/python -m bench.view [--quick] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from typing import Any

import psycopg
from bench._common import (
    ORG,
    create_database,
    embedded_server,
    server_versions,
    summary,
    table,
    write_results,
)
from psycopg.types.json import Jsonb

SIZES = (1_000, 3_000, 10_000, 30_000, 100_000)
QUICK_SIZES = (1_000, 10_000, 100_000)
OWNER = str(uuid.UUID(int=7))
NS = {"owner_id": OWNER}
TARGET_MS = 1_000.0  # "a 100,000-line view completes in well under a second"

# The view as it was before the fix: every line numbered through lines[i].
BEFORE_SQL = r"""
CREATE SCHEMA bench_before;
CREATE FUNCTION bench_before.numbered(lines text[], first_number int) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(string_agg(lpad((first_number + i - 1)::text, 6) || E'\t' || lines[i], E'\n' ORDER BY i), '')
    FROM generate_subscripts(lines, 1) i
$$;
CREATE FUNCTION bench_before.view(content text, raw text, view_range int[], budget int) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lines text[] := memory._lines(content);
    total int := cardinality(lines);
    first int := 0;
    last int := total;
    header text := format(E'Here''s the content of %s with line numbers:\n', raw);
    body text;
    shown int;
BEGIN
    IF view_range IS NOT NULL THEN
        first := least(greatest(1, view_range[1]) - 1, total);
        last := CASE WHEN view_range[2] = -1 THEN total
                     WHEN view_range[2] < 0 THEN greatest(0, total + view_range[2])
                     ELSE least(view_range[2], total) END;
    END IF;
    lines := lines[first + 1 : last];
    body := bench_before.numbered(lines, first + 1);
    IF length(header) + length(body) <= budget THEN
        RETURN header || body;
    END IF;
    SELECT count(*) INTO shown FROM (
        SELECT sum(length(l) + 8) OVER (ORDER BY i) AS used
        FROM unnest(lines) WITH ORDINALITY AS t(l, i)) u
    WHERE u.used <= budget - length(header) - 200;
    RETURN header || bench_before.numbered(lines[1 : shown], first + 1)
        || format(E'\n[Output truncated at %s characters: showing lines %s-%s of %s. '
                  'Use view_range to see the other lines.]',
                  budget, first + 1, first + shown, total);
END
$$;
"""

# Three views of each file: the whole file (cut at view_max_chars), its second
# half from the middle on (cut the same way) and its last three lines.
VIEWS = {"whole": "none", "second half": "[n / 2, -1]", "last lines": "[n - 2, -1]"}


def _path(lines: int) -> str:
    return f"/memories/long-{lines}.md"


def _command(lines: int, view: str) -> dict[str, Any]:
    command: dict[str, Any] = {"command": "view", "path": _path(lines)}
    if view == "second half":
        command["view_range"] = [lines // 2, -1]
    elif view == "last lines":
        command["view_range"] = [lines - 2, -1]
    return command


def measure(dsn: str, sizes: tuple[int, ...], rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(BEFORE_SQL)
        for lines in sizes:
            content = "\n" * (lines - 1)  # `lines` empty lines: the longest file max_content allows
            conn.execute(
                "SELECT memory.run(%s, %s, %s)",
                (
                    ORG,
                    Jsonb({"command": "create", "path": _path(lines), "file_text": content}),
                    Jsonb(NS),
                ),
            )
        for name in VIEWS:
            for lines in sizes:
                command = Jsonb(_command(lines, name))
                arg_range = _command(lines, name).get("view_range")
                samples: dict[str, list[float]] = {"before": [], "after": []}
                texts: dict[str, str] = {}
                for _ in range(rounds):
                    for side in ("before", "after"):  # interleaved: both see the same load
                        started = time.perf_counter()
                        if side == "after":
                            text = conn.execute(
                                "SELECT memory.run(%s, %s, %s)", (ORG, command, Jsonb(NS))
                            ).fetchone()[0]
                        else:
                            text = conn.execute(
                                "SELECT bench_before.view(f.content, %s, %s::int[],"
                                " memory._setting_int('view_max_chars')) FROM memory.files f"
                                " WHERE f.path = %s",
                                (_path(lines), arg_range, _path(lines)),
                            ).fetchone()[0]
                        samples[side].append((time.perf_counter() - started) * 1000)
                        texts[side] = text
                assert texts["before"] == texts["after"], (name, lines)
                row = {side: summary(s) for side, s in samples.items()}
                print(
                    f"{name:>10} {lines:>7,} lines: before {row['before']['median']:9.1f} ms,"
                    f" after {row['after']['median']:7.2f} ms"
                )
                out.setdefault(name, {})[str(lines)] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1,000, 10,000 and 100,000 lines")
    ap.add_argument("--rounds", type=int, default=3, help="views per side and size")
    args = ap.parse_args()
    sizes = QUICK_SIZES if args.quick else SIZES
    results: dict[str, Any] = {"quick": args.quick, "rounds": args.rounds, "sizes": list(sizes)}
    results["loadavg_before"] = os.getloadavg()
    with embedded_server("view") as srv:
        dsn = create_database(srv, "view")
        results["versions"] = server_versions(dsn)
        results["views"] = measure(dsn, sizes, args.rounds)
    results["loadavg_after"] = os.getloadavg()
    name = "view-quick" if args.quick else "view"
    print()
    print(markdown(results))
    for t in targets(results):
        print(f"[{'met' if t['met'] else 'MISSED'}] {t['target']}: {t['measured']}")
    write_results(name, results)


def _ms(s: dict[str, float]) -> str:
    return f"{s['median']:.2f} ({s['min']:.2f}..{s['max']:.2f})"


def _per_thousand(results: dict[str, Any], view: str, side: str) -> list[float]:
    return [results["views"][view][str(n)][side]["median"] / n * 1000 for n in results["sizes"]]


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    largest = str(max(results["sizes"]))
    whole = results["views"]["whole"][largest]
    last = results["views"]["second half"][largest]
    per_k = _per_thousand(results, "whole", "after")
    growth = per_k[-1] / per_k[0]
    return [
        {
            "target": f"a {int(largest):,}-line view well under a second",
            "measured": f"{whole['after']['median']:.1f} ms whole, {last['after']['median']:.1f} ms"
            f" from its middle on (before: {whole['before']['median']:,.0f} ms and"
            f" {last['before']['median']:,.0f} ms)",
            "met": whole["after"]["median"] < TARGET_MS and last["after"]["median"] < TARGET_MS,
        },
        {
            "target": "view time grows linearly with the file",
            "measured": f"time per 1,000 lines at {int(largest):,} lines is {growth:.2f}x that at"
            f" {results['sizes'][0]:,} (before: "
            f"{_per_thousand(results, 'whole', 'before')[-1] / _per_thousand(results, 'whole', 'before')[0]:.1f}x)",
            "met": growth < 3,
        },
    ]


def markdown(results: dict[str, Any]) -> str:
    parts = [
        f"`memory.run` view of files of empty lines (up to 100,000: the longest `max_content`"
        f" allows), today's function against the numbering as it was (`bench_before`, each"
        f" line through its subscript), interleaved, {results['rounds']} rounds; milliseconds,"
        f" median (min..max). Both sides return the same text.",
    ]
    for view in VIEWS:
        rows = []
        for n in results["sizes"]:
            r = results["views"][view][str(n)]
            rows.append(
                (
                    f"{n:,}",
                    _ms(r["before"]),
                    _ms(r["after"]),
                    f"{r['before']['median'] / n * 1000:.2f}",
                    f"{r['after']['median'] / n * 1000:.3f}",
                    f"{r['before']['median'] / r['after']['median']:,.0f}x",
                )
            )
        parts.append(f"**{view}** (`view_range` {VIEWS[view]}):")
        parts.append(
            table(
                (
                    "lines",
                    "before",
                    "after",
                    "before ms / 1k lines",
                    "after ms / 1k lines",
                    "ratio",
                ),
                rows,
            )
        )
    parts.append("Reproduce: `.venv/bin/python -m bench.view` (`--quick`: 1k, 10k, 100k lines).")
    return "\n\n".join(parts)


if __name__ == "__main__":
    main()
