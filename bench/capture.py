"""The capture queue's SQL side: a 10-message turn indexed, leased (memory.pending_captures)
and applied (memory.capture_facts) with a scripted decision, against memory.save_facts of
the same facts, in namespaces of 1,000 and 100,000 facts; then 8 workers draining a queue.
SECTION (below) is what is measured and how, as docs/benchmarks.md shows it.

    .venv/bin/python -m bench.capture [--quick]
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from typing import Any

import numpy as np
import psycopg
from bench._common import (
    DIMENSIONS,
    ORG,
    Result,
    Row,
    database,
    error_bars,
    function_stats,
    index,
    join_if_past_line,
    medians,
    new_result,
    options,
    result_name,
    run_together,
    save,
    section,
    spread,
    stat,
    table,
    timed,
    unit_vectors,
)

from pgmemory import calls

SECTION = """\
## Capture (bench/capture.py)

The SQL side of capture, without a model: a scripted decision with {dimensions}-dimensional random unit embeddings (precomputed, so the model and the embedder cost nothing), bound as the client binds them (`pgmemory.calls`: message vectors and the new facts' vectors as binary `real[]`).

### Per turn, against save_facts

A turn is {messages} messages indexed into one chat (`index_message` each, with an embedding), the chat leased (`pending_captures(1)`: its {messages} new messages and the 10 before them as context) and the decision applied (`capture_facts`: {adds} adds and {supersedes} supersede of a pre-filled fact). Against it, in a second namespace with the same pre-fill, `save_facts` of the same {facts_per_turn} facts with the same embeddings in one call — what a client that keeps no queue would call after its own extraction. Each namespace is pre-filled by COPY with {prefills_text} facts of random unit vectors (the derived columns checked equal to what `save_facts` writes), then ANALYZEd: at 1,000 the dedupe check is one exact pass over the namespace (a batch of n facts is checked exactly while the namespace holds at most min(n, 10) {x} `exact_search_max_rows` live facts: 6,000 for capture's 3 adds, 8,000 for save_facts' 4), at the larger sizes each fact walks the HNSW index (`ef_search` 400). {rounds} rounds of {turns} turns per size, each round one chat; within a round the two sides alternate turn by turn, which goes first alternating too; per round the median turn of each side, then the median (min..max) of the rounds. Every call is its own transaction, as the client makes them. *capture* is lease + apply — indexing is recall's work, done with or without capture; the ratio is capture over save_facts, taken per round.

{turns_table}

![capture per turn against save_facts, and the drain](../bench/results/{name}.png)

What capture adds: the lease is a transaction of its own (committed before the model is asked: {lease_small:.2f} ms at {small:,} facts, where it reads the chat's new messages and the 10 before them through `messages_chat_idx`, however long the chat), and the apply moves the chat's watermark and forgets the superseded fact besides saving. The {adds} adds go to `save_facts` as one batch, so their dedupe check reads the namespace once. The supersede's new fact is inserted without a dedupe check (it replaces a fact by decision), which is why capture is no dearer than save_facts where that check walks the HNSW index: {ratios}.

{profile}

### {workers} workers draining the queue

{chats:,} chats of {owners} users ({chat_messages} messages each, indexed before the clock starts) drained by {workers} threads with a connection each, released together: each leases up to {batch} chats (`pending_captures({batch})`) and applies one add per chat (`capture_facts`), until nothing is offered; against the same with 1 worker. Each chat must be handed out exactly once: every round counts the chats handed out twice and those never handed out, and checks that every chat ends `captured` (nothing pending) holding its one fact. {drain_rounds} rounds, fresh chats each; chats per second of wall time, median (min..max).

{drain_table}

{workers} workers drain {speedup:.1f}{x} as fast as one on this {nproc}-core machine: the leases never overlap (`FOR UPDATE SKIP LOCKED`), and two workers saving into one user's namespace take turns on its lock. A captured chat leaves the queue's scan until a new message arrives (`capture_facts` moves it past the scan's range), so a poll no longer checks every chat ever captured for new messages: one that finds nothing costs {idle_poll} ms right after the drains, with {captured:,} chats captured (median (min..max) of {idle_n} polls; until a vacuum removes the chats' dead row versions, the scan still steps over them).

Reproduce: `.venv/bin/python -m bench.capture{quick}` (`--rounds N`, `--turns N`)."""

MESSAGES = 10  # per turn
ADDS, SUPERSEDES = 3, 1
WORKERS = 8
LEASE_BATCH = 10  # pending_captures(max) of a draining worker
OWNERS = 50  # users of the drained chats
CHAT_MESSAGES = 2
TARGET_RATIO = 1.3
MODEL = "bench-random"
X = "\N{MULTIPLICATION SIGN}"

CAPTURES = (
    "SELECT capture_id, chat_id, messages, context FROM memory.pending_captures(%s::int, %s::int)"
)
DERIVED = (
    "SELECT content, content_hash, text_key, search_text::text, embedding::text, embedding_model,"
    " source, version, forgotten_at, superseded_by FROM memory.facts WHERE namespace_id = %s"
)


def as_list(v: np.ndarray) -> list[float]:
    return [float(x) for x in v]


def execute(conn: psycopg.Connection, call: calls.Call[Any]) -> Any:
    return call.shape(conn.execute(call.sql, call.params).fetchall())


def namespace(conn: psycopg.Connection, owner: str) -> str:
    """The owner's user namespace, created as save_facts would create it; its id."""
    return conn.execute(
        "INSERT INTO memory.namespaces (organization_id, id, scope, owner_id) "
        "VALUES (%(org)s, memory._namespace_id(%(org)s, 'user', %(o)s, NULL), 'user', %(o)s) "
        "RETURNING id",
        {"org": ORG, "o": owner},
    ).fetchone()[0]


def prefill(conn: psycopg.Connection, owner: str, contents: list[str], vecs: np.ndarray) -> dict:
    """A user namespace holding `contents` with `vecs` (COPY: the derived columns come
    from the table's generated columns and trigger, as for save_facts); content -> id."""
    nsid = namespace(conn, owner)
    join_if_past_line(conn, nsid, len(contents))
    copy_sql = (
        "COPY memory.facts (organization_id, namespace_id, content, embedding, embedding_model)"
        " FROM STDIN"
    )
    with conn.cursor() as cur, cur.copy(copy_sql) as copy:
        for content, v in zip(contents, vecs, strict=True):
            copy.write_row((ORG, nsid, content, "[" + ",".join(f"{x:.9g}" for x in v) + "]", MODEL))
    rows = conn.execute("SELECT content, id FROM memory.facts WHERE namespace_id = %s", (nsid,))
    return dict(rows.fetchall())


def check_prefill_matches_save_facts(conn: psycopg.Connection, rng: np.random.Generator) -> None:
    """The same facts by COPY and by save_facts: every stored column alike but the ids
    and timestamps."""
    contents = ["Lives in Porto with a sister named Ana", "Drinks green tea, no sugar"]
    vecs = unit_vectors(rng, len(contents))
    copied, saved = str(uuid.uuid4()), str(uuid.uuid4())
    prefill(conn, copied, contents, vecs)
    items = [calls.fact_item(c) for c in contents]
    for call in calls.save_facts(
        ORG, items, [as_list(v) for v in vecs], {"owner_id": saved}, None, MODEL
    ):
        execute(conn, call)

    def stored(owner: str) -> list[tuple[Any, ...]]:
        nsid = conn.execute(
            "SELECT memory._namespace_id(%s, 'user', %s, NULL)", (ORG, owner)
        ).fetchone()[0]
        return sorted(conn.execute(DERIVED, (nsid,)).fetchall())

    if stored(copied) != stored(saved):
        raise AssertionError("the COPY pre-fill differs from what save_facts stores")


class Turns:
    """Two namespaces with the same pre-fill: one fed by capture, one by save_facts."""

    def __init__(self, conn: psycopg.Connection, prefill_n: int, rng: np.random.Generator) -> None:
        self.conn, self.rng, self.n = conn, rng, prefill_n
        contents = [f"pre-filled fact {i} of {prefill_n}" for i in range(prefill_n)]
        vecs = unit_vectors(rng, prefill_n)
        self.capture_owner, self.save_owner = str(uuid.uuid4()), str(uuid.uuid4())
        self.targets = list(prefill(conn, self.capture_owner, contents, vecs).values())
        prefill(conn, self.save_owner, contents, vecs)
        conn.execute("ANALYZE memory.facts")
        conn.execute("ANALYZE memory.messages")
        self.chat = ""
        self.turn = 0

    def new_chat(self, name: str) -> None:
        """The turns from now on are a new conversation (so a chat stays a realistic length)."""
        self.chat = f"chat-{self.n}-{name}"

    def next_turn(self) -> tuple[list[dict], list[list[float]], list[dict], list[list[float]]]:
        """The turn's messages with their vectors, and the decision's facts with theirs."""
        t, self.turn = self.turn, self.turn + 1
        messages = [
            {
                "id": f"t{t}-m{i}",
                "chat_id": self.chat,
                "owner_id": self.capture_owner,
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"turn {t} message {i}: something the user said at {self.n} facts",
                "created_at": f"2025-03-01T{t // 60 % 24:02d}:{t % 60:02d}:{i:02d}Z",
            }
            for i in range(MESSAGES)
        ]
        facts = [
            {"content": f"turn {t} new fact {j} at {self.n}"} for j in range(ADDS + SUPERSEDES)
        ]
        vecs = unit_vectors(self.rng, MESSAGES + len(facts))
        return (
            messages,
            [as_list(v) for v in vecs[:MESSAGES]],
            facts,
            [as_list(v) for v in vecs[MESSAGES:]],
        )

    def capture(self, messages: list[dict], mvecs: list, facts: list[dict], fvecs: list) -> dict:
        """One turn through the queue: seconds of index, lease and apply."""
        conn, out = self.conn, {}
        t0 = time.perf_counter()
        for m, v in zip(messages, mvecs, strict=True):
            execute(conn, calls.index_message(ORG, m, [v], MODEL))
        out["index"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        rows = conn.execute(CAPTURES, (1, 50)).fetchall()
        out["lease"] = time.perf_counter() - t0
        [(capture_id, chat, got, _)] = rows
        if chat != self.chat or [m["id"] for m in got] != [m["id"] for m in messages]:
            raise AssertionError(f"leased {chat} {got}")
        ops: list[dict[str, Any]] = [{"op": "add", "content": f["content"]} for f in facts[:ADDS]]
        ops += [
            {"op": "supersede", "fact_id": str(self.targets.pop()), "content": f["content"]}
            for f in facts[ADDS:]
        ]
        call = calls.capture_facts(capture_id, ops, MODEL, fvecs)  # as capture_pending binds them
        t0 = time.perf_counter()
        statuses = [r.status for r in execute(conn, call)]
        out["apply"] = time.perf_counter() - t0
        if statuses != ["saved"] * ADDS + ["superseded"] * SUPERSEDES:
            raise AssertionError(f"capture_facts: {statuses}")
        return out

    def save(self, facts: list[dict], fvecs: list) -> float:
        items = [calls.fact_item(f) for f in facts]
        ns = {"owner_id": self.save_owner}
        t0 = time.perf_counter()
        saved = [
            s
            for call in calls.save_facts(ORG, items, fvecs, ns, None, MODEL)
            for s in execute(self.conn, call)
        ]
        seconds = time.perf_counter() - t0
        if any(s.id is None for s in saved):
            raise AssertionError(f"save_facts: {saved}")
        return seconds


def per_turn(dsn: str, prefill_n: int, rounds: int, turns: int, rng: np.random.Generator) -> Row:
    """Interleaved rounds of capture turns and save_facts turns: medians per round."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        side, loaded = timed(Turns, conn, prefill_n, rng)
        print(f"pre-filled 2 x {prefill_n:,} facts in {loaded:.0f}s")
        parts: dict[str, list[float]] = {
            k: [] for k in ("index", "lease", "apply", "capture", "save")
        }
        ratios: list[float] = []
        for r in range(rounds):
            side.new_chat(str(r))
            got: dict[str, list[float]] = {k: [] for k in parts}
            for t in range(turns):
                messages, mvecs, facts, fvecs = side.next_turn()
                first = (r + t) % 2 == 0
                if not first:
                    got["save"].append(side.save(facts, fvecs))
                step = side.capture(messages, mvecs, facts, fvecs)
                if first:
                    got["save"].append(side.save(facts, fvecs))
                for k, v in step.items():
                    got[k].append(v)
                got["capture"].append(step["lease"] + step["apply"])
            med = {k: float(np.median(v)) * 1000 for k, v in got.items()}
            for k in parts:
                parts[k].append(med[k])
            ratios.append(med["capture"] / med["save"])
            print(
                f"{prefill_n:,} facts, round {r + 1}: capture {med['capture']:.2f} ms "
                f"(lease {med['lease']:.2f}, apply {med['apply']:.2f}; index {med['index']:.2f}), "
                f"save_facts {med['save']:.2f} ms, ratio {ratios[-1]:.2f}"
            )
    return {
        "prefill": prefill_n,
        **{f"{k}_ms": stat(v) for k, v in parts.items()},
        "ratio": stat(ratios),
    }


PROFILED = ("pending_captures", "capture_facts", "save_facts", "_insert_fact", "_rows_upto")
PROFILE_TURNS = 20


def profile(dsn: str, prefill_n: int, rng: np.random.Generator) -> list[Row]:
    """Where a turn's time goes: PROFILE_TURNS more turns of each side, each side on a
    session of its own with track_functions = all; per function its calls per turn and
    mean total and self time per call."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        side = Turns(conn, prefill_n, rng)
        side.new_chat("profile")
        for _ in range(5):  # warm: plans cached, pages read
            messages, mvecs, facts, fvecs = side.next_turn()
            side.capture(messages, mvecs, facts, fvecs)
            side.save(facts, fvecs)
    rows: list[Row] = []
    for name, entry in (("capture", "capture_facts"), ("save_facts", "save_facts")):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_reset()")
            conn.execute("SET track_functions = 'all'")
            side.conn = conn
            for _ in range(PROFILE_TURNS):
                messages, mvecs, facts, fvecs = side.next_turn()
                if name == "capture":
                    side.capture(messages, mvecs, facts, fvecs)
                else:
                    side.save(facts, fvecs)
        got = {
            f: (n, total, own)
            for f, n, total, own in function_stats(dsn, entry, PROFILE_TURNS)
            if f in PROFILED
        }
        if entry not in got:
            raise AssertionError(f"no statistics of {entry} after its session ended")
        rows += [
            {
                "side": name,
                "function": f,
                "calls_per_turn": got[f][0] / PROFILE_TURNS,
                "total_ms": got[f][1] / got[f][0],
                "self_ms": got[f][2] / got[f][0],
            }
            for f in PROFILED
            if f in got and got[f][0]
        ]
    return rows


def drain(
    dsn: str, chats: int, workers: int, tag: str, rng: np.random.Generator
) -> tuple[float, int, int]:
    """`chats` fresh chats drained by `workers` connections: the wall seconds, the chats
    handed out more than once and those never handed out. Raises unless every chat
    ends captured with its one fact."""
    owners = [str(uuid.UUID(int=int(rng.integers(1 << 62)) << 64 | i)) for i in range(OWNERS)]
    expected = {(owners[c % OWNERS], f"{tag}-c{c}") for c in range(chats)}
    vecs = unit_vectors(rng, chats)
    fact_vec = {chat: as_list(v) for (_, chat), v in zip(sorted(expected), vecs, strict=True)}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for owner, chat in sorted(expected):
            for i in range(CHAT_MESSAGES):
                message = {
                    "id": f"m{i}",
                    "chat_id": chat,
                    "owner_id": owner,
                    "role": "user",
                    "content": f"{chat} says {i}",
                }
                execute(conn, calls.index_message(ORG, message, None))
    conns = [psycopg.connect(dsn, autocommit=True) for _ in range(workers)]
    handed: list[list[str]] = [[] for _ in range(workers)]

    def work(w: int) -> None:
        conn = conns[w]
        while rows := conn.execute(CAPTURES, (LEASE_BATCH, 50)).fetchall():
            for capture_id, chat, _, _ in rows:
                ops = [{"op": "add", "content": f"fact of {chat}"}]
                call = calls.capture_facts(capture_id, ops, MODEL, [fact_vec[chat]])
                statuses = [r.status for r in execute(conn, call)]
                if statuses != ["saved"]:
                    raise AssertionError(f"{chat}: {statuses}")
                handed[w].append(chat)

    try:
        wall = run_together(workers, work)
    finally:
        for c in conns:
            c.close()
    counts = Counter(chat for got in handed for chat in got)
    twice = [chat for chat, n in counts.items() if n > 1]
    lost = {chat for _, chat in expected} - set(counts)
    with psycopg.connect(dsn, autocommit=True) as conn:
        status = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'captured' AND pending_messages = 0),"
            " count(*) FROM memory.capture_status(%s) WHERE chat_id LIKE %s",
            (ORG, f"{tag}-%"),
        ).fetchone()
        facts = conn.execute(
            "SELECT count(DISTINCT source->>'chat_id'), count(*) FROM memory.facts"
            " WHERE source->>'chat_id' LIKE %s",
            (f"{tag}-%",),
        ).fetchone()
    if status != (chats, chats) or facts != (chats, chats):
        raise AssertionError(f"{tag}: captured/all {status}, chats with facts/facts {facts}")
    return wall, len(twice), len(lost)


IDLE_POLLS = 20


def config(rounds: int, turns: int, prefills: tuple[int, ...], chats: int) -> dict[str, Any]:
    return {
        "dimensions": DIMENSIONS,
        "messages": MESSAGES,
        "adds": ADDS,
        "supersedes": SUPERSEDES,
        "prefills": prefills,
        "rounds": rounds,
        "turns": turns,
        "workers": WORKERS,
        "batch": LEASE_BATCH,
        "chats": chats,
        "owners": OWNERS,
        "chat_messages": CHAT_MESSAGES,
        "drain_rounds": rounds,
    }


def drain_row(workers: int, chats: int, runs: list[tuple[float, int, int]]) -> Row:
    """The drain table's row of `workers` from its rounds (drain's answers)."""
    return {
        "workers": workers,
        "chats": chats,
        "chats_per_s": stat([chats / wall for wall, _, _ in runs]),
        "handed_twice": sum(twice for _, twice, _ in runs),
        "lost": sum(lost for _, _, lost in runs),
    }


def idle_poll(dsn: str) -> Row:
    """pending_captures(10) with nothing pending, after every drain: ms per poll."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        captured = conn.execute("SELECT count(*) FROM memory.captures").fetchone()[0]
        seconds = []
        for _ in range(IDLE_POLLS):
            rows, t = timed(lambda: conn.execute(CAPTURES, (LEASE_BATCH, 50)).fetchall())
            if rows:
                raise AssertionError(f"offered after the drains: {rows}")
            seconds.append(t)
    return {"captured_chats": captured, "ms": stat([1000 * t for t in seconds])}


def main() -> None:
    ap = options(__doc__, "1,000 and 10,000 facts, 200 chats to drain, 3 rounds of 10 turns")
    ap.add_argument("--rounds", type=int, help="rounds per size and drains (default 5; --quick: 3)")
    ap.add_argument("--turns", type=int, help="turns per round and side (default 20; --quick: 10)")
    ap.add_argument(
        "--profile-only",
        action="store_true",
        help="only the profile, on a fresh database, into the last run's result",
    )
    args = ap.parse_args()
    rounds = args.rounds or (3 if args.quick else 5)
    turns = args.turns or (10 if args.quick else 20)
    prefills = (1000, 10000) if args.quick else (1000, 100000)
    chats = 200 if args.quick else 1000
    result = new_result("capture", args.quick, **config(rounds, turns, prefills, chats))
    rng = np.random.default_rng(7)
    if args.profile_only:  # the last run's figures, and a profile beside them
        earlier = json.loads((args.out / f"{result_name(result)}.json").read_text())
        with database(earlier, "capture") as dsn:
            earlier["tables"]["profile"] = profile(dsn, min(prefills), rng)
        save(earlier, args.out)
        return
    with database(result, "capture") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            check_prefill_matches_save_facts(conn, rng)
        result["tables"]["turns"] = [per_turn(dsn, p, rounds, turns, rng) for p in prefills]
        result["tables"]["profile"] = profile(dsn, min(prefills), rng)
        runs: dict[int, list[tuple[float, int, int]]] = {WORKERS: [], 1: []}
        for r in range(rounds):
            for w in (WORKERS, 1) if r % 2 == 0 else (1, WORKERS):
                runs[w].append(drain(dsn, chats, w, f"r{r}w{w}", rng))
                wall, twice, lost = runs[w][-1]
                print(
                    f"drain round {r + 1}, {w} workers: {chats / wall:.0f} chats/s, "
                    f"{twice} handed out twice, {lost} lost"
                )
        result["tables"]["idle_poll"] = [idle_poll(dsn)]
        result["tables"]["drain"] = [drain_row(w, chats, runs[w]) for w in (WORKERS, 1)]
    save(result, args.out)
    if any(row["handed_twice"] or row["lost"] for row in result["tables"]["drain"]):
        raise SystemExit("a chat was handed out twice or lost: see the drain table")


# ------------------------------------------------------------------ report


def targets(r: Result) -> list[dict[str, Any]]:
    c, out = r["config"], []
    for row in r["tables"]["turns"]:
        x = row["ratio"]
        out.append(
            {
                "target": f"capture of a {c['messages']}-message turn (pending_captures + capture_facts, "
                f"{c['adds']} adds + {c['supersedes']} supersede) ≤ {TARGET_RATIO:g}{X} save_facts of the "
                f"same facts, {row['prefill']:,} facts in the namespace",
                "measured": f"{x['median']:.2f}{X} ({x['min']:.2f}..{x['max']:.2f}): "
                f"{row['capture_ms']['median']:.2f} vs {row['save_ms']['median']:.2f} ms",
                "met": x["median"] <= TARGET_RATIO,
            }
        )
    for row in r["tables"]["drain"]:
        if row["workers"] == c["workers"]:
            out.append(
                {
                    "target": f"{row['workers']} workers draining {row['chats']:,} chats: "
                    "no chat handed out twice, none lost",
                    "measured": f"{row['handed_twice']} twice, {row['lost']} lost in {row['chats_per_s']['n']}"
                    f" rounds; {row['chats_per_s']['median']:.0f} chats/s",
                    "met": row["handed_twice"] == 0 and row["lost"] == 0,
                }
            )
    return out


def markdown(r: Result) -> str:
    c = r["config"]
    turns = [
        (
            f"{row['prefill']:,}",
            spread(row["index_ms"]),
            spread(row["lease_ms"]),
            spread(row["apply_ms"]),
            f"**{spread(row['capture_ms'])}**",
            f"**{spread(row['save_ms'])}**",
            spread(row["ratio"]),
        )
        for row in r["tables"]["turns"]
    ]
    headers = [
        "facts in namespace",
        f"index {c['messages']} messages, ms",
        "lease, ms",
        "apply, ms",
        "capture (lease + apply), ms",
        f"save_facts of {c['adds'] + c['supersedes']}, ms",
        "capture / save_facts",
    ]
    drain_rows = [
        (
            row["workers"],
            f"{row['chats']:,}",
            spread(row["chats_per_s"], ".0f"),
            row["handed_twice"],
            row["lost"],
        )
        for row in r["tables"]["drain"]
    ]
    prefills = [f"{p:,}" for p in c["prefills"]]
    by_size = index(r["tables"]["turns"], "prefill")
    small = min(by_size)
    drains = index(r["tables"]["drain"], "workers")
    [idle] = r["tables"]["idle_poll"]
    return section(
        SECTION,
        r,
        facts_per_turn=c["adds"] + c["supersedes"],
        prefills_text=" or ".join(prefills),
        turns_table=table(headers, turns),
        drain_table=table(["workers", "chats", "chats/s", "handed out twice", "lost"], drain_rows),
        small=small,
        lease_small=by_size[small]["lease_ms"]["median"],
        profile=profile_markdown(r, by_size[small]),
        ratios=", ".join(
            f"{row['ratio']['median']:.2f}{X} at {p:,} facts" for p, row in by_size.items()
        ),
        speedup=drains[c["workers"]]["chats_per_s"]["median"] / drains[1]["chats_per_s"]["median"],
        x=X,
        nproc=r["environment"]["machine"]["nproc"],
        idle_poll=spread(idle["ms"]),
        idle_n=idle["ms"]["n"],
        captured=idle["captured_chats"],
    )


def profile_markdown(r: Result, small: Row) -> str:
    """The profile's table, and what capture adds to save_facts at the smallest size."""
    rows = r["tables"].get("profile")
    if not rows:
        return ""
    c = r["config"]
    by = {(x["side"], x["function"]): x for x in rows}
    own = {
        side: by[(side, fn)]
        for side, fn in (("capture", "capture_facts"), ("save_facts", "save_facts"))
    }
    nested = by.get(("capture", "save_facts"))
    insert = by.get(("capture", "_insert_fact"))
    count = {side: by.get((side, "_rows_upto")) for side in ("capture", "save_facts")}
    added = small["capture_ms"]["median"] - small["save_ms"]["median"]
    body = table(
        ["side", "function", "calls per turn", "total ms per call", "self ms per call"],
        [
            (
                x["side"],
                f"`{x['function']}`",
                f"{x['calls_per_turn']:g}",
                f"{x['total_ms']:.2f}",
                f"{x['self_ms']:.2f}",
            )
            for x in rows
        ],
    )
    why = (
        f"At {c['prefills'][0]:,} facts capture adds {added:.2f} ms to save_facts' "
        f"{small['save_ms']['median']:.2f} ms a turn. It writes what save_facts writes — its "
        f"`save_facts` call of the {c['adds']} adds ({nested['total_ms']:.2f} ms here, against "
        f"{own['save_facts']['total_ms']:.2f} ms for all {c['adds'] + c['supersedes']} facts on the "
        "other side; within it the count of the namespace's live facts that decides between the "
        f"exact pass and the index, `_rows_upto`, {count['capture']['total_ms']:.2f} ms against "
        f"{count['save_facts']['total_ms']:.2f}), the supersede's fact by `_insert_fact` "
        f"({insert['total_ms']:.2f} ms, most of "
        "it the row's entry in the HNSW index) — and besides: the lease, a transaction of its own "
        f"({small['lease_ms']['median']:.2f} ms), and in `capture_facts` itself "
        f"({own['capture']['self_ms']:.2f} ms) the source's message ids, the forget of the "
        "superseded fact and the chat's new watermark. That work is the same at any size; where "
        "the dedupe check is one exact pass over a small namespace it is a larger share of a "
        "cheap call."
        if nested and insert and all(count.values())
        else ""
    )
    return (
        f"Where a turn's time goes at {c['prefills'][0]:,} facts: {PROFILE_TURNS} more turns of "
        "each side on a session of its own with `track_functions = all`, read from "
        "`pg_stat_user_functions` (calls per turn; mean total and self time per call; the "
        "instrumentation slows every call a little):\n\n" + body + ("\n\n" + why if why else "")
    )


def figure(plt: Any, r: Result) -> Any:
    """ms per turn: capture (lease + apply, stacked) beside save_facts, per namespace size;
    the drain's chats/s."""
    rows = list(r["tables"]["turns"])
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.6), gridspec_kw={"width_ratios": [3, 2]})
    xs = list(range(len(rows)))
    width = 0.38
    lease = [row["lease_ms"]["median"] for row in rows]
    apply = [row["apply_ms"]["median"] for row in rows]
    left = [x - width / 2 for x in xs]
    right = [x + width / 2 for x in xs]
    ax.bar(left, lease, width, label="lease (pending_captures)", color="#9bb7d4")
    ax.bar(left, apply, width, bottom=lease, label="apply (capture_facts)", color="#4c72b0")
    capture = [row["capture_ms"] for row in rows]
    ax.errorbar(left, medians(capture), yerr=error_bars(capture), fmt="none", capsize=3, color="k")
    save_ms = [row["save_ms"] for row in rows]
    ax.bar(
        right,
        medians(save_ms),
        width,
        yerr=error_bars(save_ms),
        capsize=3,
        label="save_facts of the same facts",
        color="#d9822b",
    )
    for x, row in zip(left, rows, strict=True):
        top = row["capture_ms"]["max"]
        ax.annotate(
            f"{row['ratio']['median']:.2f}{X}",
            (x + width / 2, top),
            ha="center",
            va="bottom",
            xytext=(0, 4),
            textcoords="offset points",
            fontsize=9,
        )
    ax.set_xticks(xs, [f"{row['prefill']:,} facts" for row in rows])
    ax.set_ylabel("ms per turn (median of rounds, min..max)")
    ax.set_title(f"One {r['config']['messages']}-message turn: capture against save_facts")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    drain_rows = r["tables"]["drain"]
    stats = [row["chats_per_s"] for row in drain_rows]
    y = list(range(len(stats)))[::-1]
    ax2.barh(y, medians(stats), xerr=error_bars(stats), capsize=3, color="#55a868")
    ax2.set_yticks(
        y, [f"{row['workers']} worker{'s' if row['workers'] > 1 else ''}" for row in drain_rows]
    )
    ax2.set_xlabel("chats captured per second of wall time")
    ax2.set_title(f"Draining {drain_rows[0]['chats']:,} chats")
    ax2.grid(True, axis="x", alpha=0.3)
    return fig


FIGURES = {"": figure}


if __name__ == "__main__":
    main()
