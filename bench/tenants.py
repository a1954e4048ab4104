"""Huge tenants at the speed of their own index: memory.search_facts, search_messages
and recall_context on tenants of 5%, 10% and 20% of a 1,000,000-fact table (and a
user of 50,000 of 1,000,000 messages), against the physical reference — the same
tenant's rows alone in a table of their own with their own HNSW index — before and
after memory.maintain() gives large namespaces indexes of their own. SECTION (below)
is what is measured and how, as docs/benchmarks.md shows it.

    .venv/bin/python -m bench.tenants --quick   # 100,000 facts and messages
    .venv/bin/python -m bench.tenants           # 1,000,000 of each (about 45 minutes)
    .venv/bin/python -m bench.tenants --keep    # keep the loaded server for the next run
    .venv/bin/python -m bench.tenants --graphs  # the own index's build parameters (~25 min)
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from typing import Any

import numpy as np
import psycopg
from bench._common import (
    INDEX_BUILD,
    ORG,
    Result,
    Row,
    create_database,
    embedded_server,
    fill,
    function_stats,
    join_large_namespaces,
    new_result,
    options,
    percentile,
    result_name,
    run_maintain,
    save,
    save_study,
    section,
    server_settings,
    server_versions,
    set_index_build,
    spread,
    stat,
    table,
    timed,
)
from bench.search import VECTOR_KINDS, Corpus, kept_load, vectors_text, zipf_sizes
from pgvector.psycopg import register_vector

SECTION = """\
## Huge tenants at the speed of their own index{variant_title} (bench/tenants.py)

{facts:,} facts in one `memory.facts` table: three tenants of 20%, 10% and 5% of it ({heads}), the rest over {users:,} users by Zipf's law (vectors and texts as in bench/search.py). {vectors} Likewise {messages:,} messages in `memory.messages`, one user holding {heavy:,} of them (5%) in chats of 50. Searches run as the user (claims set, `ns` `{{}}`: the user's own namespace), k = 10, the query vector bound in binary as a `real[]`, as the Python client binds it; vector-only is `{{"text_weight": 0}}` with an empty query text, text-only has no query vector; `recall_context` is `{{"facts": 0, "messages": 10}}`.

*Reference* is the physical one: the same tenant's rows alone in a table of their own with their own HNSW index (m 16, ef_construction 64), queried with `ORDER BY embedding <=> q LIMIT 10` at the smallest `ef_search` of {ladder} that reaches recall@10 ≥ 0.97 against the exact scan. *Shared index* is before `memory.maintain()` (every namespace on the table's one HNSW graph); *own index* after it (`namespace_index_min_rows` {min_rows:,}: it built {own_indexes} in {maintain_s:.0f} s). Latency: median over {rounds} rounds of each round's p50 (min..max of rounds), {queries} queries per group per round; recall@10 against the exact scan of the namespace.

Server: `shared_buffers` {shared_buffers}, `maintenance_work_mem` {maintenance_work_mem} for the builds. Load: {load}.

{tables}

{beside}{profile}
Reproduce: `.venv/bin/python -m bench.tenants{quick}{vectors_flag}` (`--keep --profile-only`: the profile again on the kept server)."""
PROFILE_TEXT = """
### Where the time goes

After the run, on the same server with the own indexes in place: for {queries} queries per group, the hybrid call as the user (`{{}}`: the user's own namespace), then its two lists called alone as `memory._rank` calls them (`memory._nearest` 40 deep and `memory._text_ranked` 40 deep, under the search's own settings), median of 3 of each per query, then the median over the queries; *rest* is the call less the two lists (namespace resolution, option parsing, fusion, the final join, the round trip; a difference of medians, so within noise it can come out below 0). *Text candidates* are the rows holding a query lexeme, which the text list ranks. For the tenants, EXPLAIN (ANALYZE, BUFFERS) of the vector scans themselves (medians over the queries): the own index's as a vector-only search scans it (10 deep at its calibrated `ef_search`, without the iterative scan: `memory._nearest_own`'s first scan); the reference's, 10 deep at the `ef_search` chosen above; and the reference table scanned as the own index is (the own index's `ef_search`); then the same scans as plain queries, timed as the searches are (no EXPLAIN, median of 3 per query), beside the search's vector-only call timed alike. And for the tenants, the vector-only call on a session of its own with `track_functions = all` (3 calls per query, after a warm-up not counted): each layer's mean time per call from `pg_stat_user_functions` (the embedded server is built without `pg_stat_statements`; the function counters split the call the same way), in the lines below the table.

{table}

{reading}
"""

HEADS = (0.20, 0.10, 0.05)
HEAVY = 0.05  # the heavy user's share of the messages
REF_LADDER = (40, 60, 80, 100, 150, 200, 300, 400, 600, 800, 1000)  # as memory.maintain's
K = 10
SERVER_SETTINGS = {"shared_buffers": "6GB"}
PHASES = ("shared index", "own index")
TIMES = "\u00d7"  # the multiplication sign of ratios


def corpus(
    n_rows: int, n_users: int, heads: tuple[float, ...], seed: int, vectors: str = VECTOR_KINDS[0]
) -> Corpus:
    """bench/search.py's corpus, with `heads` (shares of the table) as the first users."""
    c = Corpus(n_rows, n_users, seed=seed, vectors=vectors)
    head_rows = [int(n_rows * h) for h in heads]
    c.sizes = head_rows + zipf_sizes(n_rows - sum(head_rows), n_users - len(heads))
    c.signature = (
        f"tenants v2 rows={n_rows} users={n_users} heads={heads} seed={seed} vectors={vectors}"
    )
    sizes = np.array(c.sizes)
    tiny = [int(u) for u in np.flatnonzero((sizes >= 5) & (sizes <= 20))]
    medium = [
        int(u)
        for u in np.argsort(np.abs(sizes - 1_000), kind="stable")[:20]
        if u >= len(heads) and abs(sizes[u] - 1_000) <= 300
    ]
    c.groups = {"tiny": tiny[:: max(1, len(tiny) // 50)][:50], "medium": medium}
    for u, share in enumerate(heads):
        c.groups[f"{share:.0%} tenant"] = [u]
    return c


def _copy(conn: psycopg.Connection, c: Corpus) -> None:
    conn.execute("CREATE UNLOGGED TABLE staged (owner uuid, content text, embedding vector(384))")
    with conn.cursor() as cur, cur.copy("COPY staged FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["uuid", "text", "vector"])
        for user, owner in enumerate(c.owners):
            vecs, texts = c.facts(user)
            for v, t in zip(vecs, texts, strict=True):
                copy.write_row((uuid.UUID(owner), t, v))


def load(conn: psycopg.Connection, facts: Corpus, messages: Corpus) -> dict[str, float]:
    """Both tables by COPY, their HNSW and GIN indexes built afterwards."""
    timings: dict[str, float] = {}
    indexes = [
        r[0]
        for r in conn.execute(
            "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indexrelid::regclass::text"
            " = ANY(ARRAY['memory.facts_embedding_idx', 'memory.facts_search_idx',"
            " 'memory.messages_embedding_idx', 'memory.messages_search_idx'])"
        ).fetchall()
    ]
    conn.execute(
        "DROP INDEX memory.facts_embedding_idx, memory.facts_search_idx,"
        " memory.messages_embedding_idx, memory.messages_search_idx"
    )
    owners = sorted(set(facts.owners) | set(messages.owners))
    conn.execute(
        "INSERT INTO memory.namespaces (organization_id, id, scope, owner_id) "
        "SELECT %(org)s, memory._namespace_id(%(org)s, 'user', o, NULL), 'user', o "
        "FROM unnest(%(owners)s::uuid[]) o",
        {"org": ORG, "owners": owners},
    )
    t0 = time.perf_counter()
    _copy(conn, facts)
    join_large_namespaces(conn, "staged")
    conn.execute(
        "INSERT INTO memory.facts (organization_id, namespace_id, content, embedding, embedding_model)"
        " SELECT %(org)s, memory._namespace_id(%(org)s, 'user', owner, NULL), content, embedding,"
        " 'generated' FROM staged ORDER BY random()",
        {"org": ORG},
    )
    conn.execute("DROP TABLE staged")
    _copy(conn, messages)
    conn.execute(
        "INSERT INTO memory.messages (organization_id, namespace_id, chat_id, message_id, role,"
        " content, embedding, embedding_model, created_at)"
        " SELECT %(org)s, memory._namespace_id(%(org)s, 'user', owner, NULL),"
        " 'chat-' || (n / 50), 'm' || n, CASE WHEN n %% 2 = 0 THEN 'user' ELSE 'assistant' END,"
        " content, embedding, 'generated', now() - n * interval '1 second'"
        " FROM (SELECT s.*, row_number() OVER (PARTITION BY owner) AS n FROM staged s) s"
        " ORDER BY random()",
        {"org": ORG},
    )
    conn.execute("DROP TABLE staged")
    timings["copy_and_insert_s"] = time.perf_counter() - t0
    for t in ("memory.facts", "memory.messages", "memory.namespaces"):
        conn.execute(f"VACUUM ANALYZE {t}")
    set_index_build(conn)
    for d in indexes:
        print(f"  {d[:80]} ...", flush=True)
        _, seconds = timed(conn.execute, d)
        name = d.split()[2]
        timings[f"{name}_s"] = seconds
    conn.execute("ANALYZE memory.facts")
    conn.execute("ANALYZE memory.messages")
    return timings


def ns_of(conn: psycopg.Connection, owner: str) -> uuid.UUID:
    return conn.execute(
        "SELECT memory._namespace_id(%s, 'user', %s, NULL)", (ORG, owner)
    ).fetchone()[0]


def build_references(conn: psycopg.Connection, kind: str, c: Corpus) -> dict[str, float]:
    """Each head tenant's rows in a table of their own with their own HNSW index."""
    table_name = "facts" if kind == "fact" else "messages"
    seconds = {}
    for name, users in c.groups.items():
        if "tenant" not in name:
            continue
        ref = _ref_table(kind, users[0])
        conn.execute(f"DROP TABLE IF EXISTS {ref}")
        conn.execute(
            f"CREATE TABLE {ref} AS SELECT id, embedding FROM memory.{table_name}"
            " WHERE organization_id = %s AND namespace_id = %s",
            (ORG, ns_of(conn, c.owners[users[0]])),
        )
        _, seconds[ref] = timed(
            conn.execute,
            f"CREATE INDEX ON {ref} USING hnsw (embedding vector_cosine_ops)"
            " WITH (m = 16, ef_construction = 64)",
        )
        conn.execute(f"ANALYZE {ref}")
    return seconds


def _ref_table(kind: str, user: int) -> str:
    return f"bench_ref_{kind}_{user}"


class Query:
    def __init__(self, conn: psycopg.Connection, kind: str, c: Corpus, user: int) -> None:
        self.user, self.owner = user, c.owners[user]
        self.vector, self.text = c.query(user)
        self.claims = json.dumps({"sub": self.owner, "role": "authenticated"})
        table_name = "facts" if kind == "fact" else "messages"
        live = " AND forgotten_at IS NULL" if kind == "fact" else ""
        self.exact = [
            str(r[0])
            for r in conn.execute(
                f"SELECT id FROM memory.{table_name} WHERE organization_id = %s AND namespace_id = %s"
                f"{live} ORDER BY (embedding <=> %s) + 0, id LIMIT {K}",
                (ORG, ns_of(conn, self.owner), self.vector),
            ).fetchall()
        ]
        if kind == "message":  # search_messages answers message ids: map them
            self.exact = [
                r[0]
                for r in conn.execute(
                    "SELECT message_id FROM memory.messages WHERE organization_id = %s"
                    " AND id = ANY(%s::uuid[]) ORDER BY array_position(%s::uuid[], id)",
                    (ORG, self.exact, self.exact),
                ).fetchall()
            ]


SEARCHES: dict[str, tuple[str, str]] = {  # method: (kind, SQL)
    "search_facts vector-only": (
        "fact",
        "SELECT id::text FROM memory.search_facts(%(org)s, '', %(q)b::real[], '{}', 10,"
        " '{\"text_weight\": 0}')",
    ),
    "search_facts hybrid": (
        "fact",
        "SELECT id::text FROM memory.search_facts(%(org)s, %(text)s, %(q)b::real[], '{}', 10)",
    ),
    "search_facts text-only": (
        "fact",
        "SELECT id::text FROM memory.search_facts(%(org)s, %(text)s, NULL, '{}', 10)",
    ),
    "search_messages vector-only": (
        "message",
        "SELECT id FROM memory.search_messages(%(org)s, '', %(q)b::real[], NULL, 10,"
        " '{\"text_weight\": 0}')",
    ),
    "search_messages hybrid": (
        "message",
        "SELECT id FROM memory.search_messages(%(org)s, %(text)s, %(q)b::real[], NULL, 10)",
    ),
    "search_messages text-only": (
        "message",
        "SELECT id FROM memory.search_messages(%(org)s, %(text)s, NULL, NULL, 10)",
    ),
    "recall_context hybrid": (
        "message",
        "SELECT m.message_id FROM memory.recall_context(%(org)s, %(text)s, %(q)b::real[], '{}',"
        ' \'{"facts": 0, "messages": 10}\') r JOIN memory.messages m'
        " ON m.organization_id = %(org)s AND m.id = CASE WHEN r.kind = 'message' THEN substr(r.id, 9)::uuid END",
    ),
}


def _timed_search(conn: psycopg.Connection, sql: str, q: Query) -> tuple[list[str], float]:
    conn.execute("SELECT set_config('request.jwt.claims', %s, false)", (q.claims,))
    params = {"org": ORG, "q": q.vector.tolist(), "text": q.text}
    rows, seconds = timed(lambda: conn.execute(sql, params).fetchall())
    return [str(r[0]) for r in rows], seconds


def measure_searches(
    conn: psycopg.Connection,
    kind: str,
    c: Corpus,
    queries: dict[str, list[Query]],
    rounds: int,
    phase: str,
) -> list[Row]:
    out = []
    methods = [m for m, (k, _) in SEARCHES.items() if k == kind]
    samples: dict[tuple[str, str], dict[str, list]] = {}
    for _ in range(rounds):  # rounds outermost: a burst of load hits every method
        for group, qs in queries.items():
            for method in methods:
                s = samples.setdefault((group, method), {"p50": [], "recall": [], "rows": []})
                lat = []
                for q in qs:
                    got, dt = _timed_search(conn, SEARCHES[method][1], q)
                    lat.append(1000 * dt)
                    s["rows"].append(len(got))
                    if len(q.exact):
                        s["recall"].append(len(set(got) & set(q.exact)) / len(q.exact))
                s["p50"].append(statistics.median(lat))
                s.setdefault("p95", []).append(percentile(lat, 95))
    conn.execute("SELECT set_config('request.jwt.claims', '', false)")
    for (group, method), s in samples.items():
        out.append(
            {
                "kind": kind,
                "phase": phase,
                "group": group,
                "method": method,
                "size": statistics.median(c.sizes[q.user] for q in queries[group]),
                "p50_ms": stat(s["p50"]),
                "p95_ms": stat(s["p95"]),
                "recall_at_10": statistics.fmean(s["recall"]) if s["recall"] else None,
                "rows_min": min(s["rows"]),
            }
        )
    return out


AB_PHASES = ("own indexes in the table", "own indexes dropped")
AB_GROUPS = ("tiny", "medium")


def measure_beside(
    conn: psycopg.Connection, kind: str, c: Corpus, queries: dict[str, list[Query]], rounds: int
) -> list[Row]:
    """Tiny and medium namespaces with the own indexes in the table and without them
    (dropped inside a transaction that is rolled back), round by round in turns: the
    two sides are minutes apart at most, so a drift of the shared machine falls on both
    alike, where the shared and own phases are a whole maintain() apart."""
    small = {g: qs for g, qs in queries.items() if g in AB_GROUPS}
    runs: dict[tuple[str, str, str], list[Row]] = {}
    for i in range(rounds):
        for phase in AB_PHASES if i % 2 == 0 else AB_PHASES[::-1]:
            with conn.transaction(force_rollback=True):
                if phase == AB_PHASES[1]:
                    conn.execute("SELECT memory._drop_namespace_indexes()")
                for x in measure_searches(conn, kind, c, small, 1, phase):
                    runs.setdefault((phase, x["group"], x["method"]), []).append(x)
    return [
        {
            **xs[0],
            "p50_ms": stat([x["p50_ms"]["median"] for x in xs]),
            "p95_ms": stat([x["p95_ms"]["median"] for x in xs]),
            "rows_min": min(x["rows_min"] for x in xs),
        }
        for xs in runs.values()
    ]


def measure_reference(
    conn: psycopg.Connection, kind: str, queries: dict[str, list[Query]], rounds: int
) -> list[Row]:
    """Each tenant's own table: recall and p50 by ef_search; the chosen one marked."""
    out = []
    for group, qs in queries.items():
        if "tenant" not in group:
            continue
        ref = _ref_table(kind, qs[0].user)
        exact = {}
        for q in qs:
            rows = conn.execute(
                f"SELECT id FROM {ref} ORDER BY (embedding <=> %s) + 0, id LIMIT {K}", (q.vector,)
            ).fetchall()
            exact[id(q)] = {str(r[0]) for r in rows}
        for ef in REF_LADDER:
            conn.execute(f"SET hnsw.ef_search = {ef}")
            p50s, recalls = [], []
            for _ in range(rounds):
                lat = []
                for q in qs:
                    rows, dt = timed(
                        lambda q=q, ref=ref: conn.execute(
                            f"SELECT id FROM {ref} ORDER BY embedding <=> %s LIMIT {K}", (q.vector,)
                        ).fetchall()
                    )
                    lat.append(1000 * dt)
                    recalls.append(len({str(r[0]) for r in rows} & exact[id(q)]) / K)
                p50s.append(statistics.median(lat))
            recall = statistics.fmean(recalls)
            row = {
                "kind": kind,
                "group": group,
                "ef_search": ef,
                "recall_at_10": recall,
                "p50_ms": stat(p50s),
                "chosen": recall >= 0.97 or ef == REF_LADDER[-1],
            }
            out.append(row)
            if row["chosen"]:
                break
        conn.execute("RESET hnsw.ef_search")
    return out


# Where a hybrid call's time goes: its two lists called alone, as memory._rank calls
# them (under search's own index settings), and the rest by difference.
PIECES = {
    "vector list": "SELECT count(*) FROM memory._nearest(%(kind)s, %(org)s, %(ids)s, NULL,"
    " memory._embedding(%(q)b::real[]), 40, NULL, NULL, NULL)",
    "text list": "SELECT count(*) FROM memory._text_ranked(%(kind)s, %(org)s, %(ids)s, NULL,"
    " memory._query_lexemes(%(text)s), 40, NULL, false)",
}
SEARCH_SETTINGS = {"hnsw.iterative_scan": "relaxed_order", "hnsw.ef_search": "800"}
CANDIDATES = (  # the rows the text list ranks: those holding a query lexeme
    "SELECT count(*) FROM memory.{table} WHERE organization_id = %(org)s"
    " AND namespace_id = ANY(%(ids)s) AND search_text @@ memory._any_lexeme(%(text)s)"
)
PROFILED = 10  # queries per group
SHOW = ("tiny", "medium", "5% tenant", "10% tenant", "20% tenant")


def _explain(conn: psycopg.Connection, sql: str, params: dict[str, Any]) -> tuple[float, int, str]:
    """EXPLAIN ANALYZE's execution time, shared buffers hit and the index scanned."""
    plan = conn.execute(
        "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) " + sql, params
    ).fetchone()[0][0]

    def index_name(node: dict[str, Any]) -> str:
        if "Index Name" in node:
            return f"{node['Node Type']} on {node['Index Name']}"
        return next((n for n in map(index_name, node.get("Plans", [])) if n), "")

    top = plan["Plan"]
    return plan["Execution Time"], top.get("Shared Hit Blocks", 0), index_name(top)


def profile(
    conn: psycopg.Connection, kind: str, queries: dict[str, list[Query]], ref_ef: dict[str, int]
) -> list[Row]:
    """Per group: the hybrid call, its vector and text lists alone, the rest by difference;
    for a tenant also EXPLAIN ANALYZE of its own index's scan against the reference's."""
    table_name = "facts" if kind == "fact" else "messages"
    hybrid = SEARCHES[f"search_{table_name} hybrid"][1]
    vector_only = SEARCHES[f"search_{table_name} vector-only"][1]
    out = []
    for group in (g for g in SHOW if g in queries):
        qs = queries[group][:PROFILED]
        ms: dict[str, list[float]] = {"call": [], "vector-only call": [], **{p: [] for p in PIECES}}
        candidates = []
        for q in qs:
            conn.execute("SELECT set_config('request.jwt.claims', %s, false)", (q.claims,))
            params = {"org": ORG, "q": q.vector.tolist(), "text": q.text, "kind": kind}
            params["ids"] = conn.execute(
                "SELECT memory._resolve_many(%s, '{}')", (ORG,)
            ).fetchone()[0]
            for _ in range(3):  # the median of 3 of each
                sample = {
                    "call": timed(lambda p=params: conn.execute(hybrid, p).fetchall())[1],
                    "vector-only call": timed(
                        lambda p=params: conn.execute(vector_only, p).fetchall()
                    )[1],
                }
                for key, value in SEARCH_SETTINGS.items():
                    conn.execute(f"SET {key} = '{value}'")
                for piece, sql in PIECES.items():
                    sample[piece] = timed(lambda s=sql, p=params: conn.execute(s, p).fetchall())[1]
                conn.execute("RESET hnsw.iterative_scan")
                conn.execute("RESET hnsw.ef_search")
                for key, value in sample.items():
                    ms[key].append(1000 * value)
            candidates.append(
                conn.execute(CANDIDATES.format(table=table_name), params).fetchone()[0]
            )
        row: Row = {
            "kind": kind,
            "group": group,
            "queries": len(qs),
            **{f"{key}_ms": statistics.median(v) for key, v in ms.items()},
            "text_candidates": statistics.median(candidates),
        }
        row["rest_ms"] = row["call_ms"] - sum(row[f"{p}_ms"] for p in PIECES)
        if "tenant" in group:
            row.update(_explain_tenant(conn, kind, qs, ref_ef[group]))
            row.update(_function_profile(conn.info.dsn, kind, qs))
        out.append(row)
    conn.execute("SELECT set_config('request.jwt.claims', '', false)")
    return out


def _explain_tenant(conn: psycopg.Connection, kind: str, qs: list[Query], ref_ef: int) -> Row:
    """The own index's scan as a vector-only search runs it (memory._nearest_own's first
    scan: k deep at the calibrated ef_search, no iterative scan), the reference's (10 deep
    at its ef_search), and the reference at the own index's ef_search: medians over the
    queries."""
    table_name = "facts" if kind == "fact" else "messages"
    live = " AND forgotten_at IS NULL" if kind == "fact" else ""
    ns = ns_of(conn, qs[0].owner)
    own_ef = conn.execute("SELECT memory._own_ef_search(%s, %s, %s)", (kind, ORG, ns)).fetchone()[0]
    ref = _ref_table(kind, qs[0].user)
    scans = {  # name: (ef_search, iterative scan, SQL)
        "own": (
            own_ef,
            "off",
            f"SELECT id FROM memory.{table_name} WHERE organization_id = %(org)s"
            f" AND namespace_id = %(ns)s{live}"
            f" ORDER BY COALESCE(embedding, embedding) <=> %(v)s LIMIT {K}",
        ),
        "reference": (
            ref_ef,
            "off",
            f"SELECT id FROM {ref} ORDER BY embedding <=> %(v)s LIMIT {K}",
        ),
        "reference_at_own": (
            own_ef,
            "off",
            f"SELECT id FROM {ref} ORDER BY embedding <=> %(v)s LIMIT {K}",
        ),
    }
    row: Row = {"own_ef_search": own_ef, "reference_ef_search": ref_ef, "own_depth": K}
    for name, (ef, iterative, sql) in scans.items():
        conn.execute(f"SET hnsw.ef_search = {int(ef)}")
        conn.execute(f"SET hnsw.iterative_scan = '{iterative}'")
        runs = [_explain(conn, sql, {"org": ORG, "ns": ns, "v": q.vector}) for q in qs]
        row[f"{name}_ms"] = statistics.median(r[0] for r in runs)
        # the same scan as a plain query, timed as the searches are (no EXPLAIN): median of 3
        plain = [
            statistics.median(
                timed(
                    lambda q=q, sql=sql: conn.execute(
                        sql, {"org": ORG, "ns": ns, "v": q.vector}
                    ).fetchall()
                )[1]
                for _ in range(3)
            )
            for q in qs
        ]
        row[f"{name}_plain_ms"] = 1000 * statistics.median(plain)
        row[f"{name}_buffers"] = statistics.median(r[1] for r in runs)
        row[f"{name}_plan"] = runs[0][2]
    conn.execute("RESET hnsw.ef_search")
    conn.execute("RESET hnsw.iterative_scan")
    return row


# The layers of a vector-only search, outermost first (pg_stat_user_functions).
LAYERS = ("_rank", "_nearest", "_nearest_own", "_resolve")


def _function_profile(dsn: str, kind: str, qs: list[Query]) -> Row:
    """The vector-only call on a session of its own with track_functions = all, 3 calls
    per query after a warm-up without it: the mean client time of a call and each layer's
    mean total time per call from pg_stat_user_functions."""
    entry = "search_facts" if kind == "fact" else "search_messages"
    sql = SEARCHES[f"{entry} vector-only"][1]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.prepare_threshold = None
        calls = []
        for traced in (False, True):
            if traced:  # the warm-up's calls were not counted: nothing is pending
                conn.execute("SELECT pg_stat_reset()")
                conn.execute("SET track_functions = 'all'")
            for q in qs:
                conn.execute("SELECT set_config('request.jwt.claims', %s, false)", (q.claims,))
                params = {"org": ORG, "q": q.vector.tolist()}
                for _ in range(3):
                    _, seconds = timed(lambda p=params: conn.execute(sql, p).fetchall())
                    calls.append(1000 * seconds)
    stats = {f: (n, total) for f, n, total, _ in function_stats(dsn, entry, 3 * len(qs))}
    if entry not in stats:
        raise AssertionError(f"no statistics of {entry} after its session ended")
    n = stats[entry][0]
    return {
        "fn_client_ms": statistics.mean(calls[3 * len(qs) :]),
        "fn_entry_ms": stats[entry][1] / n,
        **{f"fn{f}_ms": stats[f][1] / n if f in stats else 0.0 for f in LAYERS},
    }


def main() -> None:
    ap = options(__doc__, "100,000 facts and messages")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=50, help="queries per group")
    ap.add_argument(
        "--keep", action="store_true", help="keep the loaded server (bench-tenants-kept)"
    )
    ap.add_argument(
        "--profile-only",
        action="store_true",
        help="with --keep: only the profile (where each call's time goes), added to the\n"
        "last full run's result",
    )
    ap.add_argument(
        "--own-only",
        action="store_true",
        help="with --keep: measure the own-index phase and the reference again, keeping\n"
        "the shared phase and the build of the last full run's result",
    )
    ap.add_argument(
        "--graphs",
        action="store_true",
        help="only recall@10 and p50 by ef_search for each HNSW build parameter set of\n"
        "GRAPHS, on the 5% and 20% tenants' rows alone (bench/results/tenants-graphs[-quick])",
    )
    ap.add_argument(
        "--vectors",
        choices=VECTOR_KINDS,
        default=VECTOR_KINDS[0],
        help="the generated vectors (bench/search.py's Corpus); isotropic: the far harder\n"
        "earlier kind, a variant with its own result file",
    )
    args = ap.parse_args()
    if args.graphs:
        run_graphs(args)
        return
    n = 100_000 if args.quick else 1_000_000
    users = 5_000 if args.quick else 20_000
    min_rows = 4_000 if args.quick else None  # None: the default
    facts = corpus(n, users, HEADS, seed=7, vectors=args.vectors)
    messages = corpus(n, users, (HEAVY,), seed=8, vectors=args.vectors)
    variant = {} if args.vectors == VECTOR_KINDS[0] else {"variant": args.vectors}
    result = new_result(
        "tenants",
        args.quick,
        **variant,
        vectors=args.vectors,
        facts=n,
        messages=n,
        users=users,
        rounds=args.rounds,
        queries=args.queries,
        heads=[facts.sizes[i] for i in range(len(HEADS))],
        heavy=messages.sizes[0],
    )
    env, tables = result["environment"], result["tables"]
    with embedded_server("tenants", keep=args.keep, settings=SERVER_SETTINGS) as srv:
        dbname = f"tenants_{n}"
        signature = facts.signature + " | " + messages.signature
        load_row = kept_load(srv.dsn(dbname), signature) if args.keep else None
        dsn = srv.dsn(dbname) if load_row is not None else create_database(srv, dbname)
        env["versions"] = server_versions(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            register_vector(conn)
            conn.prepare_threshold = None
            env["server_settings"] = {
                **server_settings(dsn, ("shared_buffers", "work_mem", "jit")),
                **INDEX_BUILD,
            }
            if load_row is None:
                print(f"loading {n:,} facts and {n:,} messages ...", flush=True)
                load_row = load(conn, facts, messages)
                load_row.update(build_references(conn, "fact", facts))
                load_row.update(build_references(conn, "message", messages))
                conn.execute("CREATE TABLE bench_corpus (sig text, load jsonb)")
                conn.execute(
                    "INSERT INTO bench_corpus VALUES (%s, %s)", (signature, json.dumps(load_row))
                )
            tables["load"] = [load_row]
            for c in (facts, messages):
                for group in c.groups.values():
                    for u in group:
                        conn.execute(
                            "SELECT memory.grant(%s, %s, 'memory.read')", (ORG, c.owners[u])
                        )
            rng_pick = np.random.default_rng(3)
            queries = {}
            for kind, c in (("fact", facts), ("message", messages)):
                queries[kind] = {
                    g: [Query(conn, kind, c, int(rng_pick.choice(us))) for _ in range(args.queries)]
                    for g, us in c.groups.items()
                }
            if args.profile_only:  # the last full run's figures, and a profile beside them
                earlier = json.loads((args.out / f"{result_name(result)}.json").read_text())
                result["environment"], result["tables"] = earlier["environment"], earlier["tables"]
                result["config"] = earlier["config"]
                _add_profile(conn, result, queries)
                save(result, args.out)
                return
            rows: list[Row] = []
            phases = PHASES[1:] if args.own_only else PHASES
            if args.own_only:  # the shared phase and the build as the last full run measured them
                earlier = json.loads((args.out / f"{result_name(result)}.json").read_text())
                rows = [x for x in earlier["tables"]["searches"] if x["phase"] == PHASES[0]]
                tables["maintain"] = earlier["tables"]["maintain"]
            for phase in phases:
                if phase == "shared index":
                    run_maintain(conn, 0)
                elif not args.own_only:
                    built, seconds = run_maintain(conn, min_rows)
                    tables["maintain"] = [
                        {"action": a, "kind": k, "live_rows": r, "seconds": seconds}
                        for a, k, _, _, r, _ in built
                    ]
                    print(f"  maintain: {len(built)} indexes in {seconds:.0f} s", flush=True)
                for kind, c in (("fact", facts), ("message", messages)):
                    rows += measure_searches(conn, kind, c, queries[kind], args.rounds, phase)
                    print(f"  {phase}, {kind}s: done", flush=True)
            tables["searches"] = rows
            tables["beside"] = []
            for kind, c in (("fact", facts), ("message", messages)):
                tables["beside"] += measure_beside(conn, kind, c, queries[kind], args.rounds)
            print("  tiny and medium, own indexes in the table and dropped: done", flush=True)
            tables["reference"] = []
            for kind in ("fact", "message"):
                tables["reference"] += measure_reference(conn, kind, queries[kind], args.rounds)
            result["config"]["min_rows"] = conn.execute(
                "SELECT memory.setting('namespace_index_min_rows')::int"
            ).fetchone()[0]
            _add_profile(conn, result, queries)
    save(result, args.out)


# `--graphs`: how the build parameters (m, ef_construction) of a tenant's index move
# the ef_search it needs for recall@10 0.97, and what each step of ef_search costs, on
# its rows alone in a table of their own (an own index's graph holds exactly those
# rows). m 16 / 64 is pgvector's default, the reference's and memory.maintain()'s.
GRAPHS = ((16, 64), (24, 64), (24, 128), (32, 128))
GRAPH_LADDER = (40, 60, 100, 150, 200, 300, 400, 600, 800, 1000)
GRAPH_QUERIES = 100


def run_graphs(args: Any) -> None:
    n = 100_000 if args.quick else 1_000_000
    c = corpus(n, 5_000 if args.quick else 20_000, HEADS, seed=7, vectors=args.vectors)
    rows: list[Row] = []
    with embedded_server("tenants-graphs", settings=SERVER_SETTINGS) as srv:
        dsn = srv.dsn()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(conn)
            set_index_build(conn)
            # The same rows as the full bench's tenants: the corpus draws user by user.
            vectors = {u: c.facts(u)[0] for u in range(len(HEADS))}
            for u in (HEADS.index(0.05), HEADS.index(0.20)):
                rows += _graph_rows(conn, f"{HEADS[u]:.0%} tenant", vectors[u], c, u, args.rounds)
        versions = server_versions(dsn)
    result = {
        "bench": "tenants-graphs",
        "quick": args.quick,
        "config": {"facts": n, "queries": GRAPH_QUERIES, "rounds": args.rounds, **INDEX_BUILD},
        "tables": {"graphs": rows},
        "environment": {"versions": versions},
    }
    out = args.out / f"tenants-graphs{'-quick' if args.quick else ''}"
    save_study(result, out, graphs_markdown(result))


def _graph_rows(
    conn: psycopg.Connection, group: str, vectors: np.ndarray, c: Corpus, user: int, rounds: int
) -> list[Row]:
    vector_table(conn, "graph", vectors)
    queries = [c.query(user)[0] for _ in range(GRAPH_QUERIES)]
    exact = [
        {
            r[0]
            for r in conn.execute(
                f"SELECT id FROM graph ORDER BY (embedding <=> %s) + 0, id LIMIT {K}", (q,)
            )
        }
        for q in queries
    ]
    rows = []
    for m, ef_construction in GRAPHS:
        conn.execute("DROP INDEX IF EXISTS graph_hnsw")
        _, seconds = timed(
            conn.execute,
            "CREATE INDEX graph_hnsw ON graph USING hnsw (embedding vector_cosine_ops)"
            f" WITH (m = {m}, ef_construction = {ef_construction})",
        )
        print(f"  {group}, m {m}, ef_construction {ef_construction}: {seconds:.0f} s", flush=True)
        build = {"group": group, "rows": len(vectors), "m": m, "ef_construction": ef_construction}
        rows += [
            {**build, "build_s": seconds, **x}
            for x in ef_ladder(conn, "graph", queries, exact, GRAPH_LADDER, rounds)
        ]
    return rows


def vector_table(conn: psycopg.Connection, name: str, vectors: np.ndarray) -> None:
    """A table `name` (id, embedding) of `vectors`, their ids their positions, by COPY."""
    conn.execute(f"DROP TABLE IF EXISTS {name}")
    conn.execute(f"CREATE TABLE {name} (id int, embedding vector({vectors.shape[1]}))")
    with conn.cursor() as cur, cur.copy(f"COPY {name} FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "vector"])
        for i, v in enumerate(vectors):
            copy.write_row((i, v))


def ef_ladder(
    conn: psycopg.Connection,
    name: str,
    queries: list[np.ndarray],
    exact: list[set[int]],
    ladder: tuple[int, ...],
    rounds: int,
) -> list[Row]:
    """Recall@10 and p50 (median of `rounds`) of the plain query on table `name`'s HNSW
    index at each `ef_search` of `ladder`, against each query's `exact` ids."""
    out = []
    for ef in ladder:
        conn.execute(f"SET hnsw.ef_search = {ef}")
        p50s, recalls = [], []
        for _ in range(rounds):
            lat = []
            for q, truth in zip(queries, exact, strict=True):
                got, dt = timed(
                    lambda q=q: conn.execute(
                        f"SELECT id FROM {name} ORDER BY embedding <=> %s LIMIT {K}", (q,)
                    ).fetchall()
                )
                lat.append(1000 * dt)
                recalls.append(len({r[0] for r in got} & truth) / K)
            p50s.append(statistics.median(lat))
        out.append(
            {"ef_search": ef, "recall_at_10": statistics.fmean(recalls), "p50_ms": stat(p50s)}
        )
    return out


def graphs_markdown(r: Result) -> str:
    """Per tenant and build: the first ef_search reaching 0.97, and the whole ladder."""
    cfg = r["config"]
    lines = [
        f"HNSW build parameters on a tenant's rows alone ({cfg['facts']:,}-fact corpus,"
        f" {cfg['queries']} new queries, median of {cfg['rounds']} rounds' p50;"
        f" maintenance_work_mem {cfg['maintenance_work_mem']}).",
        "",
    ]
    builds: dict[tuple[str, int, int], list[Row]] = {}
    for x in r["tables"]["graphs"]:
        builds.setdefault((x["group"], x["m"], x["ef_construction"]), []).append(x)
    summary = []
    for (group, m, efc), ladder in builds.items():
        first = next((x for x in ladder if x["recall_at_10"] >= 0.97), None)
        summary.append(
            [
                group,
                f"{ladder[0]['rows']:,}",
                f"m {m}, ef_construction {efc}",
                f"{ladder[0]['build_s']:.0f} s",
                "not reached" if first is None else str(first["ef_search"]),
                "" if first is None else spread(first["p50_ms"]),
                f"{ladder[-1]['recall_at_10']:.3f}",
            ]
        )
    lines.append(
        table(
            [
                "tenant",
                "rows",
                "build",
                "build time",
                "ef_search for 0.97",
                "p50 ms there",
                f"recall@10 at {GRAPH_LADDER[-1]}",
            ],
            summary,
        )
    )
    lines += ["", "Every step of the ladder:", ""]
    lines.append(
        table(
            ["tenant", "build", "ef_search", "recall@10", "p50 ms"],
            [
                [
                    x["group"],
                    f"{x['m']}/{x['ef_construction']}",
                    x["ef_search"],
                    f"{x['recall_at_10']:.3f}",
                    spread(x["p50_ms"]),
                ]
                for x in r["tables"]["graphs"]
            ],
        )
    )
    return "\n".join(lines)


def _add_profile(conn: psycopg.Connection, result: Result, queries: dict[str, Any]) -> None:
    chosen = _reference(result)
    result["tables"]["profile"] = []
    for kind in ("fact", "message"):
        ref_ef = {g: x["ef_search"] for (k, g), x in chosen.items() if k == kind}
        result["tables"]["profile"] += profile(conn, kind, queries[kind], ref_ef)
        print(f"  profile, {kind}s: done", flush=True)


# ------------------------------------------------------------------------------- reporting


def _reference(r: Result) -> dict[tuple[str, str], Row]:
    return {(x["kind"], x["group"]): x for x in r["tables"]["reference"] if x["chosen"]}


def _searches(r: Result) -> dict[tuple[str, str, str], Row]:
    return {(x["phase"], x["group"], x["method"]): x for x in r["tables"]["searches"]}


def _beside(r: Result) -> dict[tuple[str, str, str, str], Row]:
    return {
        (x["phase"], x["kind"], x["group"], x["method"]): x for x in r["tables"].get("beside", [])
    }


def beside_table(r: Result) -> str:
    """The A/B rows (measure_beside), or nothing for results from before them."""
    beside = _beside(r)
    if not beside:
        return ""
    rows = []
    for kind, group, method in dict.fromkeys((k, g, m) for _, k, g, m in beside):
        with_, without = (beside.get((p, kind, group, method)) for p in AB_PHASES)
        if with_ is None or without is None:
            continue
        ratio = with_["p50_ms"]["median"] / without["p50_ms"]["median"]
        rows.append(
            [
                group,
                method,
                spread(without["p50_ms"]),
                spread(with_["p50_ms"]),
                f"{ratio:.2f}{TIMES}",
            ]
        )
    return (
        "Tiny and medium namespaces have no index of their own; whether the other namespaces'"
        " indexes slow them is measured side by side after the run: in each round the groups"
        " once with the own indexes in the table and once with them dropped inside a"
        " transaction that is rolled back, the order alternating between rounds (median of"
        f" {r['config']['rounds']} rounds' p50, min..max). The shared and own phases above are"
        " a whole `maintain()` apart, and a shared machine drifts in between.\n\n"
        + table(["group", "method", "dropped p50", "in the table p50", "in / dropped"], rows)
        + "\n"
    )


def results_table(r: Result) -> str:
    ref, s = _reference(r), _searches(r)
    out = []
    for kind in ("fact", "message"):
        groups = list(
            dict.fromkeys(x["group"] for x in r["tables"]["searches"] if x["kind"] == kind)
        )
        methods = list(
            dict.fromkeys(x["method"] for x in r["tables"]["searches"] if x["kind"] == kind)
        )
        rows = []
        for g in groups:
            base = ref.get((kind, g))
            for m in methods:
                cells = [g, m]
                for phase in PHASES:
                    x = s.get((phase, g, m))
                    if x is None:
                        cells += ["", ""]
                        continue
                    rec = "" if x["recall_at_10"] is None else f"{x['recall_at_10']:.3f}"
                    cells += [spread(x["p50_ms"]), rec]
                own = s.get(("own index", g, m))
                cells.append(
                    f"{own['p50_ms']['median'] / base['p50_ms']['median']:.2f}{TIMES}"
                    if base and own
                    else ""
                )
                rows.append(cells)
            if base:
                rows.append(
                    [
                        g,
                        f"reference (ef_search {base['ef_search']})",
                        "",
                        "",
                        spread(base["p50_ms"]),
                        f"{base['recall_at_10']:.3f}",
                        f"1.00{TIMES}",
                    ]
                )
        out.append(
            f"**{'Facts' if kind == 'fact' else 'Messages'}** (p50 ms, recall@10):\n\n"
            + table(
                [
                    "group",
                    "method",
                    "shared index p50",
                    "recall",
                    "own index p50",
                    "recall",
                    "own / reference",
                ],
                rows,
            )
        )
    return "\n\n".join(out)


def markdown(r: Result) -> str:
    built = r["tables"].get("maintain", [])
    env = r["environment"]["server_settings"]
    return section(
        SECTION,
        r,
        heads=", ".join(f"{h:,}" for h in r["config"]["heads"]),
        ladder=", ".join(map(str, REF_LADDER)),
        own_indexes=", ".join(f"{b['kind']} {b['live_rows']:,}" for b in built) or "none",
        maintain_s=built[0]["seconds"] if built else 0.0,
        min_rows=r["config"].get("min_rows", 0),
        shared_buffers=env.get("shared_buffers"),
        maintenance_work_mem=env.get("maintenance_work_mem"),
        load=", ".join(f"{k} {v:.0f} s" for k, v in r["tables"]["load"][0].items()),
        tables=results_table(r),
        beside=beside_table(r),
        profile=profile_markdown(r),
        **vectors_text(r),
    )


def profile_markdown(r: Result) -> str:
    rows = r["tables"].get("profile")
    if not rows:
        return ""

    def scan(x: Row, name: str, ef_key: str) -> str:
        return f"{x[name + '_ms']:.2f} ms, ef {x[ef_key]}, {x[name + '_buffers']:,.0f} buffers"

    lines, reading = [], []
    for x in rows:
        tenant = "own_ms" in x
        lines.append(
            [
                f"{x['group']} ({x['kind']}s)",
                f"{x['call_ms']:.2f}",
                f"{x['vector list_ms']:.2f}",
                f"{x['text list_ms']:.2f}",
                f"{x['rest_ms']:.2f}",
                f"{x['text_candidates']:,.0f}",
                scan(x, "own", "own_ef_search") if tenant else "",
                scan(x, "reference", "reference_ef_search") if tenant else "",
                scan(x, "reference_at_own", "own_ef_search") if tenant else "",
            ]
        )
        if tenant:
            reading.append(
                f"{x['group']} ({x['kind']}s): the own index scanned as the search scans it"
                f" ({_own_walk(x)}) {x['own_ms']:.2f} ms; the"
                f" reference's scan (10 deep, `ef_search` {x['reference_ef_search']})"
                f" {x['reference_ms']:.2f} ms; the reference table scanned as the own index is"
                f" {x['reference_at_own_ms']:.2f} ms, so at equal depth and `ef_search` the own"
                f" index costs {x['own_ms'] / x['reference_at_own_ms']:.2f}{TIMES} a table of"
                f" its own. The text list ranks {x['text_candidates']:,.0f} rows in"
                f" {x['text list_ms']:.2f} ms."
                + (
                    f" As plain queries: the own index's scan {x['own_plain_ms']:.2f} ms, the"
                    f" reference's {x['reference_plain_ms']:.2f} ms, the search's vector-only call"
                    f" {x['vector-only call_ms']:.2f} ms."
                    if "own_plain_ms" in x
                    else ""
                )
            )
    head = [
        "group",
        "hybrid call, ms",
        "vector list",
        "text list",
        "rest",
        "text candidates",
        "own index scan",
        "reference scan",
        "reference scanned as the own index",
    ]
    why = _why_missed(r, {(x["kind"], x["group"]): x for x in rows})
    if why:
        reading.append("\n**The targets missed, and why:**\n")
        reading += why
    return fill(
        PROFILE_TEXT,
        queries=rows[0]["queries"],
        table=table(head, lines),
        reading="\n".join(f"- {line}" if not line.startswith("\n") else line for line in reading),
    )


def _why_missed(r: Result, profiled: dict[tuple[str, str], Row]) -> list[str]:
    """One line per missed target, from the profile and the reference's ladder."""
    ref, s, out = _reference(r), _searches(r), []
    for (kind, group), base in sorted(ref.items()):
        method = f"search_{'facts' if kind == 'fact' else 'messages'} vector-only"
        x, p = s.get(("own index", group, method)), profiled.get((kind, group))
        if x is None or p is None:
            continue
        ratio = x["p50_ms"]["median"] / base["p50_ms"]["median"]
        if ratio > 1.3 or x["recall_at_10"] < 0.97:
            out.append(_why_vector_missed(kind, group, method, ratio, x, base, p))
        out += _why_hybrid_missed(kind, group, base["p50_ms"]["median"], s, p)
    for kind in ("fact", "message"):
        method = f"search_{'facts' if kind == 'fact' else 'messages'} hybrid"
        x, p = s.get(("own index", "tiny", method)), profiled.get((kind, "tiny"))
        if x is None or p is None or x["p50_ms"]["median"] <= 2:
            continue
        out.append(
            f"tiny ({kind}s), {method} {x['p50_ms']['median']:.2f} ms: the vector list"
            f" {p['vector list_ms']:.2f} ms (an exact scan of the namespace's rows, after"
            f" counting them and checking for an own index), the text list"
            f" {p['text list_ms']:.2f} ms for {p['text_candidates']:,.0f} candidates (the"
            " namespace's rows read through the btree and matched), the rest"
            f" {p['rest_ms']:.2f} ms (namespace resolution, options, fusion, the final join,"
            " the round trip)."
        )
    return out


def _own_walk(p: Row) -> str:
    """How the profile scanned the own index: k deep without the iterative scan as a
    vector-only search does, or (results from before the search read a lone list k
    deep) 40 deep with the relaxed iterative scan."""
    if "own_depth" in p:
        return f"`ef_search` {p['own_ef_search']}, {p['own_depth']} deep, no iterative scan"
    return f"`ef_search` {p['own_ef_search']}, 40 deep, relaxed iterative scan"


def _why_vector_missed(
    kind: str, group: str, method: str, ratio: float, x: Row, base: Row, p: Row
) -> str:
    """Why a tenant's vector-only search misses: the walk, the layers above it, the recall."""
    line = (
        f"{group} ({kind}s), {method} {ratio:.2f}{TIMES}, recall@10 {x['recall_at_10']:.3f}:"
        f" the own index walks {_own_walk(p)} (maintain's calibration to 98% of the"
        f" exact neighbours of 100 probes) where the reference walks {p['reference_ef_search']} 10 deep"
        f" (0.97 of 10); at equal depth and `ef_search` the own index costs"
        f" {p['own_ms'] / p['reference_at_own_ms']:.2f}{TIMES} a table of its own."
    )
    if "own_plain_ms" in p:
        line += (
            " Timed as plain queries, without EXPLAIN, in the profile: the search's vector-only"
            f" call {p['vector-only call_ms']:.2f} ms, the own index's scan alone"
            f" {p['own_plain_ms']:.2f} ms, the reference's {p['reference_plain_ms']:.2f} ms; so"
            f" the scan is {p['own_plain_ms'] / p['reference_plain_ms']:.2f}{TIMES} the reference's"
            " and the layers above it (namespace resolution, options, the own index's lookup and"
            f" `ef_search`, the final join) add"
            f" {p['vector-only call_ms'] - p['own_plain_ms']:.2f} ms."
        )
    if "fn_entry_ms" in p:
        line += " " + _layers(method, p)
    if x["recall_at_10"] < 0.97 <= base["recall_at_10"]:
        line += (
            f" The recall misses: maintain chose `ef_search` {p['own_ef_search']} where it found"
            " 98% of the 10 nearest of its 100 probes, rows of the namespace itself; this run's"
            " queries, new vectors near the tenant's topics, are harder for the graph than its"
            " own rows."
        )
    if base["recall_at_10"] < 0.97:
        line += (
            f" The reference itself reaches recall@10 {base['recall_at_10']:.3f} at"
            f" `ef_search` {base['ef_search']}, the ladder's top: 0.97 is out of reach of"
            " an HNSW index with m 16 and ef_construction 64 on this tenant's vectors."
        )
    return line


def _layers(method: str, p: Row) -> str:
    """The vector-only call's time by layer, from pg_stat_user_functions."""
    entry = method.split()[0]
    return (
        f"By layer (`track_functions = all`, means per call): of the {p['fn_client_ms']:.2f} ms"
        f" the client times, `{entry}` runs {p['fn_entry_ms']:.2f} ms on the server; within it"
        f" the own index's query (`_nearest_own`) {p['fn_nearest_own_ms']:.2f} ms,"
        f" `_nearest` around it {p['fn_nearest_ms'] - p['fn_nearest_own_ms']:.2f} ms (the own"
        f" index's lookup and `ef_search`), `_rank` {p['fn_rank_ms'] - p['fn_nearest_ms']:.2f} ms"
        f" (options, fusion), the namespace's resolution {p['fn_resolve_ms']:.2f} ms and"
        f" the rest of `{entry}` (the final join of the hits with their rows, the options'"
        " and the vector's checks)"
        f" {p['fn_entry_ms'] - p['fn_rank_ms'] - p['fn_resolve_ms']:.2f} ms; outside it"
        f" (the round trip, binding the vector, the outer query)"
        f" {p['fn_client_ms'] - p['fn_entry_ms']:.2f} ms."
    )


def _why_hybrid_missed(kind: str, group: str, reference_ms: float, s: dict, p: Row) -> list[str]:
    """Why a tenant's hybrid call is over 2x the reference: its two lists and the rest."""
    prefix = "search_facts" if kind == "fact" else "search_messages"
    out = []
    for method in (f"{prefix} hybrid", "recall_context hybrid" if kind == "message" else None):
        x = s.get(("own index", group, method))
        if method is None or x is None or x["p50_ms"]["median"] <= 2.0 * reference_ms:
            continue
        left = 2.0 * reference_ms - p["vector list_ms"]
        out.append(
            f"{group} ({kind}s), {method} {x['p50_ms']['median'] / reference_ms:.2f}{TIMES}: in the"
            f" profile the call ({p['call_ms']:.2f} ms, the search's) is its vector list"
            f" {p['vector list_ms']:.2f} ms ({p['vector list_ms'] / reference_ms:.2f}{TIMES} the"
            f" reference's p50 by itself), its text list {p['text list_ms']:.2f} ms ranking"
            f" {p['text_candidates']:,.0f} rows that hold a query lexeme, and"
            f" {p['rest_ms']:.2f} ms of the rest; 2{TIMES} the reference leaves {left:.2f} ms"
            " beside the vector list for the text list and the rest"
            + (" (recall_context runs the same two lists)." if method.startswith("recall") else ".")
        )
    return out


def targets(r: Result) -> list[dict[str, Any]]:
    ref, s = _reference(r), _searches(r)
    out = []
    for (kind, group), base in sorted(ref.items()):
        b = base["p50_ms"]["median"]
        prefix = "search_facts" if kind == "fact" else "search_messages"
        methods = [(f"{prefix} vector-only", 1.3), (f"{prefix} hybrid", 2.0)]
        if kind == "message":
            methods.append(("recall_context hybrid", 2.0))
        for method, limit in methods:
            x = s.get(("own index", group, method))
            if x is None:
                continue
            ratio = x["p50_ms"]["median"] / b
            rec = x["recall_at_10"]
            need_recall = "vector-only" in method
            out.append(
                {
                    "target": f"{group} ({kind}s): {method} p50 ≤ {limit}{TIMES} its own table's index"
                    + (", recall@10 ≥ 0.97" if need_recall else ""),
                    "measured": f"{x['p50_ms']['median']:.2f} ms vs {b:.2f} ms ({ratio:.2f}{TIMES})"
                    + (f", recall {rec:.3f}" if need_recall else ""),
                    "met": ratio <= limit and (not need_recall or rec >= 0.97),
                }
            )
    for kind, prefix in (("fact", "search_facts"), ("message", "search_messages")):
        x = s.get(("own index", "tiny", f"{prefix} hybrid"))
        v = s.get(("own index", "tiny", f"{prefix} vector-only"))
        if x and v:
            out.append(
                {
                    "target": f"tiny namespaces ({kind}s): {prefix} hybrid p50 ≤ 2 ms, recall 1.0",
                    "measured": f"{x['p50_ms']['median']:.2f} ms, recall {v['recall_at_10']:.3f}",
                    "met": x["p50_ms"]["median"] <= 2 and v["recall_at_10"] == 1.0,
                }
            )
        beside = _beside(r)
        if beside:  # the same minutes, with and without the indexes
            before = beside.get((AB_PHASES[1], kind, "medium", f"{prefix} hybrid"))
            after = beside.get((AB_PHASES[0], kind, "medium", f"{prefix} hybrid"))
            words = ("with them", "without (dropped, rolled back)")
        else:  # results from before the A/B measurement: the two phases
            before = s.get(("shared index", "medium", f"{prefix} hybrid"))
            after = s.get(("own index", "medium", f"{prefix} hybrid"))
            words = ("after", "before")
        if before and after:
            ratio = after["p50_ms"]["median"] / before["p50_ms"]["median"]
            out.append(
                {
                    "target": f"medium namespaces ({kind}s): no slower with own indexes in the table",
                    "measured": f"{after['p50_ms']['median']:.2f} ms {words[0]}, "
                    f"{before['p50_ms']['median']:.2f} ms {words[1]} ({ratio:.2f}{TIMES})",
                    "met": ratio <= 1.1,
                }
            )
    return out


if __name__ == "__main__":
    main()
