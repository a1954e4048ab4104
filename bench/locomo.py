"""Retrieval quality on LoCoMo: memory.search_facts and memory.search_messages (hybrid,
vector-only, text-only) against BM25, MiniLM dense and their fusion, on every turn of the
five LoCoMo conversations in ../shared/data/locomo/ and their questions of categories
1-4, with a diagnosis of the fusion. SECTION (below) is what is measured and how, as
docs/benchmarks.md shows it.

    .venv/bin/python -m bench.locomo            # 3 indexings and the diagnosis (~8 min)
    .venv/bin/python -m bench.locomo --quick    # one indexing (~2.5 min)
"""

from __future__ import annotations

import json
import re
import statistics
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from bench._common import (
    LOCOMO_DIR,
    ORG,
    Result,
    Row,
    create_database,
    embedded_server,
    error_bars,
    fill,
    locomo_sessions,
    medians,
    new_result,
    options,
    percentile,
    save,
    section,
    server_versions,
    stat,
    table,
    timed,
    vector_literal,
)

SECTION = """\
## Retrieval quality on LoCoMo (bench/locomo.py)

Data: the {conversations} LoCoMo conversations in `../shared/data/locomo/` ({turns:,} turns, {questions:,} questions of categories 1{dash}4 with evidence{fix}). Every turn is saved as a fact `"{{speaker}}: {{text}}"`, one namespace per conversation (`{{"scope": "project", "project_id": "conv-26", "owner_id": …}}`), with its LocalEmbedder vector, through `memory.save_facts(…, threshold => 1.0)` (an exact duplicate by normalized text would still be refused and its turn counted as the fact it duplicates: {refused} were; namespaces of {sizes} facts; saved at {saved} facts/s). The same turns are indexed as messages (`memory.index_message`: one user per conversation, one chat per session, the same vectors) and searched by that user through `memory.search_messages`.

R@k = 1 when any evidence turn of the question is among the top k. Each search runs in three modes: hybrid (the defaults: RRF of the cosine and full-text lists, `rrf_k` 60, weights 1), vector-only (`{{"text_weight": 0}}`) and text-only (no query embedding). The baselines are computed by the bench on the same facts and the same vectors: BM25, MiniLM dense (exact cosine over the same LocalEmbedder vectors) and their reciprocal rank fusion.

{recall}

Search rows: {rows}; baselines and per-category figures: the first indexing ({categories} questions).

![LoCoMo R@1/5/10](../bench/results/{name}-recall.png)

Search latency on these namespaces (exact scans: each is under `exact_search_max_rows`), over all indexings:

{latency}
{notes}{diagnosis}
Reproduce: `.venv/bin/python -m bench.locomo{reproduce}"""
ROWS = {  # how the search rows were measured, by whether there were several indexings
    True: "median (min..max) of {repeat} indexings into fresh databases (fact ids are random uuids and break score ties)",
    False: "one indexing (fact ids are random uuids and break score ties: text-only figures move between indexings)",
}
NOTES = """
Hybrid does not clearly beat text-only at {notes}: fusing in the weaker vector list adds recall deeper in the list, not at the top.
"""
DIAGNOSIS = """
### Diagnosis

From the last indexing: `search_facts`' own vector and text lists fetched 4,000 deep (`k = 1000`) and fused by the bench, cut at several depths, with other `rrf_k` and text weights; and the text list under other configurations and `ts_rank_cd` normalizations (the bench's own query).

{depths}

{fusion}

{texts}

Median length of the text list (facts sharing a lexeme with the question): {length_median:.0f}. Share of questions whose text-only list ties at the first place: {top-1 tied:.0%}; across the 10th place: {cut at 10 inside a tie:.0%} — `ts_rank_cd` ties are everywhere with OR-ed lexemes on short turns, and search breaks them by the fact's random uuid, so text-only figures move between indexings.

Reading: with `rrf_k` 60 and 40-deep lists, a fact ranked ~20th in both lists outscores one ranked first in one list only (2/80 > 1/61), so fusion favours mediocre-in-both over excellent-in-one; a smaller `rrf_k` moves hybrid's R@5 and R@10 up here (tuned on the evaluation set itself: a direction, not a number). The `english` configuration matters; `ts_rank_cd`'s length normalizations hurt on these short turns.
"""

OWNER = "00000000-0000-0000-0000-0000000000b1"  # the service saves on behalf of this user
KS = (1, 5, 10)
MODES = {
    "hybrid": {},
    "vector-only": {"text_weight": 0},
    "text-only": None,  # no query embedding
}
SEARCH = (
    "SELECT id FROM memory.search_facts(%s, %s, %b::real[], %s::jsonb, %s, %s::jsonb) "
    "ORDER BY score DESC, id"
)
SEARCH_MESSAGES = (
    "SELECT id FROM memory.search_messages(%s, %s, %b::real[], NULL, %s, %s::jsonb) "
    "ORDER BY score DESC, id"
)
MESSAGE_MODES = {f"messages {m}": options for m, options in MODES.items()}
SEARCHED = (*MODES, *MESSAGE_MODES)
BASELINES = {
    "BM25": "BM25 (rank_bm25 BM25Okapi, lower-cased `\\w+` words)",
    "MiniLM dense": "MiniLM dense (numpy cosine)",
    "RRF(BM25, MiniLM)": "RRF(BM25, MiniLM), k = 60, full lists",
}
TARGET_R10 = 0.65
DASH = "\N{EN DASH}"
Hits = dict[int, int]  # k -> 1 when an evidence turn is in the top k


@dataclass
class Conversation:
    name: str
    turns: list[dict[str, str]]  # {dia_id, content}
    questions: list[dict[str, Any]]  # {question, evidence: [dia_id], category}
    fact_ids: list[str] = field(default_factory=list)  # stored facts, in save order
    fact_turns: list[int] = field(default_factory=list)  # index of each stored fact's turn
    fact_of_dia: dict[str, str] = field(default_factory=dict)  # dia_id -> fact id (after dedupe)
    user: str = ""  # the owner of its messages (one user per conversation)

    @property
    def ns(self) -> dict[str, str]:
        return {"scope": "project", "project_id": self.name, "owner_id": OWNER}

    def gold(self, q: dict[str, Any]) -> set[str]:
        return {self.fact_of_dia[d] for d in q["evidence"]}


def _evidence(raw: list[str], known: set[str]) -> tuple[list[str], int]:
    """Evidence ids, repaired where the data is malformed ("D8:6; D9:17", "D:11:26")."""
    out: list[str] = []
    unknown = 0
    for item in raw:
        for part in re.split(r"[;,]", item):
            dia = re.sub(r"^D:", "D", part.strip())
            if dia in known:
                out.append(dia)
            elif dia:
                unknown += 1
    return out, unknown


def load_conversations(folder: Path) -> tuple[list[Conversation], dict[str, int]]:
    convs = []
    stats: Counter[str] = Counter()
    for path in sorted(folder.glob("conv-*.json")):
        data = json.loads(path.read_text())
        turns = [
            {"dia_id": t["dia_id"], "content": f"{t['speaker']}: {t['text']}"}
            for s in locomo_sessions(data.get("conversation", data))
            for t in s
        ]
        known = {t["dia_id"] for t in turns}
        questions = []
        for q in data["qa"]:
            if q.get("category") not in (1, 2, 3, 4):
                continue
            evidence, unknown = _evidence(q.get("evidence") or [], known)
            stats["unknown_evidence_ids"] += unknown
            if not evidence:
                stats["questions_without_evidence"] += 1
                continue
            questions.append(
                {"question": q["question"], "evidence": evidence, "category": q["category"]}
            )
        convs.append(Conversation(path.stem, turns, questions))
    return convs, dict(stats)


def index_conversation(conn: psycopg.Connection, conv: Conversation, vectors: np.ndarray) -> Row:
    """Saves every turn; returns what was stored and what was refused."""
    facts = [
        {"content": t["content"], "embedding": [float(x) for x in v]}
        for t, v in zip(conv.turns, vectors, strict=True)
    ]
    rows = []
    for start in range(0, len(facts), 1000):
        rows += [
            (start + ord_ - 1, fid, dup, sim)
            for ord_, fid, dup, sim in conn.execute(
                "SELECT ord, id, duplicate_of, similarity FROM memory.save_facts(%s, %s::jsonb, %s::jsonb, 1.0)",
                (ORG, json.dumps(facts[start : start + 1000]), json.dumps(conv.ns)),
            ).fetchall()
        ]
    content_of: dict[str, str] = {}
    refused = []
    for i, fid, dup, sim in rows:
        dia, content = conv.turns[i]["dia_id"], conv.turns[i]["content"]
        if fid is not None:
            conv.fact_ids.append(str(fid))
            conv.fact_turns.append(i)
            conv.fact_of_dia[dia] = str(fid)
            content_of[str(fid)] = content
        else:
            conv.fact_of_dia[dia] = str(dup)
            same_text = (
                " ".join(content_of[str(dup)].split()).lower() == " ".join(content.split()).lower()
            )
            refused.append(
                {
                    "dia_id": dia,
                    "content": content,
                    "duplicate_of": content_of[str(dup)],
                    "similarity": sim,
                    "same_normalized_text": same_text,
                }
            )
    stored = conn.execute(
        "SELECT count(*) FROM memory.facts WHERE namespace_id = "
        "memory._namespace_id(%s, 'project', %s, %s) AND forgotten_at IS NULL",
        (ORG, OWNER, conv.name),
    ).fetchone()[0]
    return {
        "conversation": conv.name,
        "turns": len(conv.turns),
        "saved": len(conv.fact_ids),
        "in_table": stored,
        "refused": refused,
    }


def index_messages(conn: psycopg.Connection, conv: Conversation, vectors: np.ndarray) -> None:
    """Every turn as a message of its owner's chat (one chat per session), with its vector."""
    conn.execute("SELECT memory.grant(%s, %s, 'memory.read')", (ORG, conv.user))

    def message(t: dict[str, str]) -> str:
        chat = f"{conv.name}/{t['dia_id'].split(':')[0]}"
        return json.dumps(
            {
                "id": t["dia_id"],
                "chat_id": chat,
                "owner_id": conv.user,
                "role": "user",
                "content": t["content"],
            }
        )

    with conn.cursor() as cur:
        cur.executemany(
            "SELECT memory.index_message(%s, %s::jsonb, %b::real[])",
            [
                (ORG, message(t), [float(x) for x in v])
                for t, v in zip(conv.turns, vectors, strict=True)
            ],
        )


def search(
    conn: psycopg.Connection,
    conv: Conversation,
    question: str,
    vector: np.ndarray | None,
    k: int,
    options: dict | None,
    messages: bool = False,
) -> list[str]:
    """memory.search_facts in the conversation's namespace, or with `messages`
    memory.search_messages as the conversation's user (message ids are the dia_ids)."""
    vec = None if vector is None else vector_literal(vector)
    opts = json.dumps(options or {})
    if messages:
        claims = json.dumps({"sub": conv.user, "role": "authenticated"})
        conn.execute("SELECT set_config('request.jwt.claims', %s, false)", (claims,))
        params: tuple = (ORG, question, vec, k, opts)
    else:
        params = (ORG, question, vec, json.dumps(conv.ns), k, opts)
    return [str(r[0]) for r in conn.execute(SEARCH_MESSAGES if messages else SEARCH, params)]


def recall(ranked: list[str], gold: set[str]) -> Hits:
    return {k: int(any(f in gold for f in ranked[:k])) for k in KS}


def average(hits: list[Hits]) -> dict[str, float]:
    return {f"R@{k}": statistics.fmean(h[k] for h in hits) for k in KS}


def rrf(
    vec: list[str],
    text: list[str],
    k: float = 60,
    depth: int | None = None,
    text_weight: float = 1.0,
) -> list[str]:
    """Reciprocal rank fusion of two rankings, each cut at `depth`."""
    score: dict[str, float] = {}
    for weight, ranking in ((1.0, vec), (text_weight, text)):
        for rank, doc in enumerate(ranking[:depth] if depth else ranking, start=1):
            score[doc] = score.get(doc, 0.0) + weight / (k + rank)
    return sorted(score, key=lambda d: -score[d])


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def evaluate(
    conn: psycopg.Connection,
    uconn: psycopg.Connection,
    convs: list[Conversation],
    turn_vecs: dict[str, np.ndarray],
    q_vecs: dict[str, np.ndarray],
    baselines: bool,
) -> tuple[dict[str, list[Hits]], dict[str, dict[int, list[int]]], dict[str, list[float]]]:
    """R@k hits per method (lists over questions), R@10 hits per category, search latencies."""
    from rank_bm25 import BM25Okapi

    methods = [*SEARCHED, *(BASELINES if baselines else ())]
    hits: dict[str, list[Hits]] = {m: [] for m in methods}
    per_category: dict[str, dict[int, list[int]]] = {m: {} for m in methods}
    latencies: dict[str, list[float]] = {m: [] for m in SEARCHED}

    def add(method: str, q: dict[str, Any], h: Hits) -> None:
        hits[method].append(h)
        per_category[method].setdefault(q["category"], []).append(h[10])

    for c in convs:
        bm25 = (
            BM25Okapi([words(c.turns[i]["content"]) for i in c.fact_turns]) if baselines else None
        )
        for qi, q in enumerate(c.questions):
            for mode, opts in [*MODES.items(), *MESSAGE_MODES.items()]:
                vec = None if opts is None else q_vecs[c.name][qi]
                on = mode in MESSAGE_MODES
                args = (uconn if on else conn, c, q["question"], vec, 10, opts, on)
                ranked, seconds = timed(search, *args)
                gold = set(q["evidence"]) if on else c.gold(q)
                latencies[mode].append(seconds)
                add(mode, q, recall(ranked, gold))
            if bm25 is None:
                continue
            by_bm25 = [
                c.fact_ids[i]
                for i in np.argsort(-bm25.get_scores(words(q["question"])), kind="stable")
            ]
            dense = -(turn_vecs[c.name][c.fact_turns] @ q_vecs[c.name][qi])
            by_dense = [c.fact_ids[i] for i in np.argsort(dense, kind="stable")]
            add("BM25", q, recall(by_bm25, c.gold(q)))
            add("MiniLM dense", q, recall(by_dense, c.gold(q)))
            add("RRF(BM25, MiniLM)", q, recall(rrf(by_bm25, by_dense), c.gold(q)))
    return hits, per_category, latencies


def main() -> None:
    ap = options(__doc__, "one indexing, no diagnosis")
    ap.add_argument("--data", type=Path, default=LOCOMO_DIR)
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="index into a fresh database this many times (fact ids are random uuids, and\n"
        "search_facts breaks score ties by id: text-only figures move between runs)",
    )
    ap.add_argument("--no-diagnose", action="store_true", help="skip the diagnosis section")
    args = ap.parse_args()
    repeat, diagnosis = (1, False) if args.quick else (args.repeat, not args.no_diagnose)

    from pgmemory.embedders import LocalEmbedder

    base, data_stats = load_conversations(args.data)
    embedder = LocalEmbedder()
    turn_vecs = {
        c.name: np.asarray(embedder.embed([t["content"] for t in c.turns]), dtype=np.float32)
        for c in base
    }
    q_vecs = {
        c.name: np.asarray(embedder.embed([q["question"] for q in c.questions]), dtype=np.float32)
        for c in base
    }
    categories = Counter(q["category"] for c in base for q in c.questions)
    result = new_result(
        "locomo",
        args.quick,
        repeat=repeat,
        diagnosis=diagnosis,
        data=data_stats,
        conversations=len(base),
        turns=sum(len(c.turns) for c in base),
        questions=sum(len(c.questions) for c in base),
        questions_by_category={str(cat): n for cat, n in sorted(categories.items())},
    )
    print(f"{len(base)} conversations, {result['config']['questions']} questions {data_stats}")
    tables = result["tables"]
    tables["runs"] = []
    latencies: dict[str, list[float]] = {m: [] for m in SEARCHED}
    index_rates: list[float] = []
    with embedded_server("locomo") as srv:
        for rep in range(repeat):
            dsn = create_database(srv, "locomo")
            result["environment"]["versions"] = server_versions(dsn)
            convs = [
                Conversation(
                    c.name, c.turns, c.questions, user=str(uuid.UUID(int=(0xC0 << 120) | i))
                )
                for i, c in enumerate(base)
            ]
            with (
                psycopg.connect(dsn, autocommit=True) as conn,
                psycopg.connect(dsn, autocommit=True) as uconn,
            ):
                t0 = time.perf_counter()
                indexing = [index_conversation(conn, c, turn_vecs[c.name]) for c in convs]
                index_rates.append(sum(i["saved"] for i in indexing) / (time.perf_counter() - t0))
                for c in convs:
                    index_messages(conn, c, turn_vecs[c.name])
                conn.execute("ANALYZE memory.facts, memory.messages")
                assert all(i["in_table"] == i["saved"] for i in indexing), indexing
                hits, per_category, lat = evaluate(conn, uconn, convs, turn_vecs, q_vecs, rep == 0)
                for m, v in lat.items():
                    latencies[m] += v
                runs = [{"run": rep + 1, "method": m, **average(h)} for m, h in hits.items()]
                tables["runs"] += runs
                print(
                    f"run {rep + 1}: "
                    + "; ".join(f"{r['method']} R@10 {r['R@10']:.3f}" for r in runs)
                )
                if rep == 0:
                    tables["indexing"] = indexing
                    by_category = {
                        m: {str(cat): statistics.fmean(v) for cat, v in sorted(cats.items())}
                        for m, cats in per_category.items()
                    }
                if rep == repeat - 1 and diagnosis:
                    tables["diagnosis"], tables["text_list"] = diagnose(conn, convs, q_vecs)
    recall_rows = []
    for m in (*SEARCHED, *BASELINES):
        runs = [r for r in tables["runs"] if r["method"] == m]
        figures = {f"R@{k}": stat([r[f"R@{k}"] for r in runs]) for k in KS}
        if m in BASELINES:  # the first indexing only
            figures = {key: runs[0][key] for key in figures}
        recall_rows.append({"method": m, **figures, "by_category": by_category[m]})
    tables["recall"] = recall_rows
    tables["saving"] = [{"facts_per_s": stat(index_rates)}]
    tables["latency"] = [
        {
            "method": m,
            "p50_ms": 1000 * statistics.median(v),
            "p95_ms": 1000 * percentile(v, 95),
            "queries": len(v),
        }
        for m, v in latencies.items()
    ]
    save(result, args.out)


# The text list as search_facts builds it, ordered by ts_rank_cd with other normalization
# flags (0 = what search_facts uses; 1 = divide by 1 + log(length), 2 = by length,
# 4 = by the mean harmonic distance between extents, 8 = by the number of unique words)
# or with a tie-break other than the random fact id.
NORMALIZATIONS = {
    "0 (search_facts), ties by id": "ts_rank_cd(f.search_text, terms) DESC, f.id",
    "1": "ts_rank_cd(f.search_text, terms, 1) DESC, f.id",
    "2": "ts_rank_cd(f.search_text, terms, 2) DESC, f.id",
    "4": "ts_rank_cd(f.search_text, terms, 4) DESC, f.id",
    "8": "ts_rank_cd(f.search_text, terms, 8) DESC, f.id",
    "0, ties by ts_rank": "ts_rank_cd(f.search_text, terms) DESC, ts_rank(f.search_text, terms) DESC, f.id",
}
NORMALIZED_TEXT = """
    SELECT f.id FROM memory.facts f, memory._any_lexeme(%(q)s) AS terms
    WHERE f.organization_id = %(org)s
      AND f.namespace_id = memory._namespace_id(%(org)s, 'project', %(owner)s, %(conv)s)
      AND f.forgotten_at IS NULL AND f.search_text @@ terms
    ORDER BY {order}
    LIMIT 10
"""
TEXT_LIST = "SELECT id, text_rank FROM memory.search_facts(%s, %s, NULL, %s::jsonb, 1000) ORDER BY score DESC, id"


def diagnose(
    conn: psycopg.Connection, convs: list[Conversation], q_vecs: dict
) -> tuple[list[Row], list[Row]]:
    """Where hybrid's R@10 comes from: the search's own vector and text lists
    fetched in full, fused by the bench at several depths; and the text list
    under the `simple` configuration."""
    questions = [(c, qi, q) for c in convs for qi, q in enumerate(c.questions)]
    depths = (10, 20, 40, 100, None)
    hits: dict[tuple[str, str], list[Hits]] = {}
    ties: Counter[str] = Counter()
    vec_lists, text_lists = [], []

    def add(part: str, setting: Any, ranked: list[str], gold: set[str]) -> None:
        hits.setdefault((part, str(setting)), []).append(recall(ranked, gold))

    for c, qi, q in questions:
        gold = c.gold(q)
        # Deep lists from search_facts itself: k = 1000 ranks each list 4000 deep.
        v_rows = conn.execute(
            "SELECT id FROM memory.search_facts(%s, %s, %b::real[], %s::jsonb, 1000, "
            "'{\"text_weight\": 0}') WHERE score > 0 ORDER BY score DESC, id",
            (ORG, q["question"], vector_literal(q_vecs[c.name][qi]), json.dumps(c.ns)),
        ).fetchall()
        t_rows = conn.execute(TEXT_LIST, (ORG, q["question"], json.dumps(c.ns))).fetchall()
        ranks = [r[1] for r in t_rows]
        if len(ranks) > 10 and ranks[9] == ranks[10]:
            ties["cut at 10 inside a tie"] += 1
        if len(ranks) > 1 and ranks[0] == ranks[1]:
            ties["top-1 tied"] += 1
        for norm, order in NORMALIZATIONS.items():
            params = {"org": ORG, "owner": OWNER, "conv": c.name, "q": q["question"]}
            n_rows = conn.execute(NORMALIZED_TEXT.format(order=order), params).fetchall()  # type: ignore[arg-type]
            add("normalization", norm, [str(r[0]) for r in n_rows], gold)
        vec_lists.append([str(r[0]) for r in v_rows])
        text_lists.append([str(r[0]) for r in t_rows])
        for d in depths:
            add("depth", d or "all", rrf(vec_lists[-1], text_lists[-1], depth=d), gold)
        add("text config", "english", text_lists[-1], gold)
    conn.execute("SELECT memory.configure('text_search_config', '\"simple\"')")
    try:
        for (c, _, q), v_list in zip(questions, vec_lists, strict=True):
            t_list = [
                str(r[0])
                for r in conn.execute(TEXT_LIST, (ORG, q["question"], json.dumps(c.ns))).fetchall()
            ]
            add("text config", "simple", t_list, c.gold(q))
            add("rrf simple text", "depth 40", rrf(v_list, t_list, depth=40), c.gold(q))
    finally:
        conn.execute("SELECT memory.configure('text_search_config', NULL)")
    # rrf_k x depth x text weight, on the same deep lists (the search's real knobs are
    # rrf_k and the weights; the depth of each list is fixed in the SQL at max(4k, 40)).
    for rrf_k in (1, 5, 10, 20, 60):
        for depth in (10, 20, 40):
            for tw in (1.0, 1.5):
                for (c, _, q), v, t in zip(questions, vec_lists, text_lists, strict=True):
                    add(
                        "grid",
                        f"rrf_k={rrf_k} depth={depth} text_weight={tw}",
                        rrf(v, t, rrf_k, depth, tw),
                        c.gold(q),
                    )
    # The real function with a smaller rrf_k (an option callers can pass today).
    for rrf_k in (10, 20):
        for c, qi, q in questions:
            ranked = search(conn, c, q["question"], q_vecs[c.name][qi], 10, {"rrf_k": rrf_k})
            add("rrf_k", rrf_k, ranked, c.gold(q))
    rows = [{"part": part, "setting": setting, **average(h)} for (part, setting), h in hits.items()]
    text_list = {"length_median": statistics.median(len(v) for v in text_lists)}
    return rows, [text_list | {k: v / len(text_lists) for k, v in ties.items()}]


# ------------------------------------------------------------------ report


def _cell(v: Any) -> str:
    if not isinstance(v, dict):
        return f"{v:.3f}"
    if v["min"] == v["max"]:
        return f"{v['median']:.3f}"
    return f"{v['median']:.3f} ({v['min']:.3f}..{v['max']:.3f})"


def _label(method: str) -> str:
    if method.startswith("messages "):
        return f"memory.search_messages {method.split(' ', 1)[1]}"
    return BASELINES.get(method) or f"memory.search_facts {method}"


def recall_table(r: Result) -> str:
    rows = []
    for row in r["tables"]["recall"]:
        bold = row["method"] in ("hybrid", "messages hybrid")
        cells = [_cell(row[f"R@{k}"]) for k in KS]
        rows.append(
            (
                f"**{_label(row['method'])}**" if bold else _label(row["method"]),
                *([f"**{c}**" for c in cells] if bold else cells),
                " / ".join(f"{v:.3f}" for v in row["by_category"].values()),
            )
        )
    return table(["method", "R@1", "R@5", "R@10", "R@10 by category 1 / 2 / 3 / 4"], rows)


def targets(r: Result) -> list[dict[str, Any]]:
    rec = {row["method"]: row for row in r["tables"]["recall"]}
    out = []
    for key, fn in (("hybrid", "search_facts"), ("messages hybrid", "search_messages")):
        r10 = rec[key]["R@10"]
        runs = [x["R@10"] for x in r["tables"]["runs"] if x["method"] == key]
        n = len(runs)
        out.append(
            {
                "target": f"LoCoMo {fn} hybrid R@10 ≥ {TARGET_R10}",
                "measured": _cell(r10)
                + (f", median of {n} indexings" if n > 1 else ", one indexing"),
                "met": r10["median"] >= TARGET_R10,
            }
        )
        rrf_ = rec["RRF(BM25, MiniLM)"]["R@10"]
        out.append(
            {
                "target": f"LoCoMo {fn} hybrid R@10 above RRF(BM25, MiniLM) of the same run",
                "measured": f"{_cell(r10)} vs {rrf_:.3f}",
                "met": min(runs) > rrf_,
            }
        )
    return out


def _diagnosis(r: Result) -> str:
    part: dict[str, dict[str, tuple[float, ...]]] = {}
    for row in r["tables"]["diagnosis"]:
        part.setdefault(row["part"], {})[row["setting"]] = tuple(row[f"R@{k}"] for k in KS)
    grid, default = part["grid"], "rrf_k=60 depth=40 text_weight=1.0"
    best = sorted(grid.items(), key=lambda kv: (-kv[1][2], -kv[1][1]))[:6]
    fusion = [(f"{default} (search_facts today)", *grid[default])]
    fusion += [(k, *v) for k, v in best if k != default]
    option = '`search_facts` itself with option `{{"rrf_k": {}}}`'
    fusion += [(option.format(k), *v) for k, v in part["rrf_k"].items()]
    texts = [
        (f"`{cfg}` (setting `text_search_config`)", *v) for cfg, v in part["text config"].items()
    ]
    texts.append(("RRF(vector, `simple` text), depth 40", *part["rrf simple text"]["depth 40"]))
    texts += [
        (f"`english`, `ts_rank_cd` normalization {n}", *v) for n, v in part["normalization"].items()
    ]
    depths = [
        (f"{k} (what search_facts does for k = 10)" if k == "40" else k, *v)
        for k, v in part["depth"].items()
    ]
    recall = ["R@1", "R@5", "R@10"]
    ties = {"top-1 tied": 0, "cut at 10 inside a tie": 0, **r["tables"]["text_list"][0]}
    return fill(
        DIAGNOSIS,
        ties,
        depths=table(["RRF (k = 60) of the two lists, each cut at", *recall], depths),
        fusion=table(["fusion of the same lists", *recall], fusion),
        texts=table(["text list", *recall], texts),
    )


def markdown(r: Result) -> str:
    c, t = r["config"], r["tables"]
    data, indexing, rate = c["data"], t["indexing"], t["saving"][0]["facts_per_s"]
    sizes = [i["saved"] for i in indexing]
    fix = []
    if data.get("questions_without_evidence"):
        fix.append(f"{data['questions_without_evidence']} questions without evidence are skipped")
    if data.get("unknown_evidence_ids"):
        fix.append(
            f"{data['unknown_evidence_ids']} malformed evidence ids are repaired "
            "as `D8:6; D9:17` split in two and `D:11:26` read as `D11:26`"
        )
    saved = f"{rate['median']:.0f}"
    if round(rate["min"]) != round(rate["max"]):
        saved += f" ({rate['min']:.0f}..{rate['max']:.0f})"
    latency = [
        (_label(x["method"]), f"{x['p50_ms']:.2f}", f"{x['p95_ms']:.2f}", f"{x['queries']:,}")
        for x in t["latency"]
    ]
    rec = {row["method"]: row for row in t["recall"]}
    notes = []
    for k in (1, 5):
        h, x = rec["hybrid"][f"R@{k}"], rec["text-only"][f"R@{k}"]
        if (h["min"] <= x["max"] and x["min"] <= h["max"]) or h["median"] <= x["median"]:
            notes.append(f"R@{k} ({_cell(h)} vs {_cell(x)})")
    return section(
        SECTION,
        r,
        conversations=len(indexing),
        dash=DASH,
        fix="".join(f"; {f}" for f in fix),
        refused=sum(len(i["refused"]) for i in indexing),
        sizes=f"{min(sizes):,}{DASH}{max(sizes):,}",
        saved=saved,
        recall=recall_table(r),
        rows=ROWS[c["repeat"] > 1].format(repeat=c["repeat"]),
        categories=" / ".join(f"{n:,}" for n in c["questions_by_category"].values()),
        latency=table(["search (k = 10)", "p50 ms", "p95 ms", "queries"], latency),
        notes=fill(NOTES, notes=" and ".join(notes)) if notes else "",
        diagnosis=_diagnosis(r) if t.get("diagnosis") else "",
        reproduce=" --quick` (one indexing, no diagnosis)."
        if r["quick"]
        else "` (3 indexings and the diagnosis).",
    )


def figure(plt: Any, r: Result) -> Any:
    """R@1/5/10 per method: search_facts and search_messages modes (median, min..max of the
    indexings) beside the baselines."""
    c, rows = r["config"], r["tables"]["recall"]
    short = {
        "hybrid": "search_facts\nhybrid",
        "vector-only": "search_facts\nvector-only",
        "text-only": "search_facts\ntext-only",
        "messages hybrid": "search_messages\nhybrid",
        "messages vector-only": "search_messages\nvector-only",
        "messages text-only": "search_messages\ntext-only",
        "RRF(BM25, MiniLM)": "RRF(BM25,\nMiniLM)",
    }
    fig, ax = plt.subplots(figsize=(12, 4.8))
    width = 0.27
    colors = {1: "#c6dbef", 5: "#6baed6", 10: "#2171b5"}
    for i, k in enumerate(KS):
        vals = [row[f"R@{k}"] for row in rows]
        stats = [v if isinstance(v, dict) else {"median": v, "min": v, "max": v} for v in vals]
        med, err = medians(stats), error_bars(stats)
        xs = [j + (i - 1) * width for j in range(len(rows))]
        ax.bar(xs, med, width, yerr=err, capsize=2, label=f"R@{k}", color=colors[k])
        if k == 10:
            for x, m in zip(xs, med, strict=True):
                ax.text(x, m + 0.01, f"{m:.2f}", ha="center", va="bottom", fontsize=7)
    ax.axhline(TARGET_R10, color="grey", linestyle="--", linewidth=1)
    ax.text(-0.45, TARGET_R10 + 0.01, f"R@10 target {TARGET_R10}", ha="left", fontsize=8)
    ax.axvline(len(SEARCHED) - 0.5, color="black", linewidth=0.6)
    ax.set_xticks(
        range(len(rows)), [short.get(row["method"], row["method"]) for row in rows], fontsize=8
    )
    ax.set_ylim(0, 1)
    ax.set_ylabel("recall (any evidence turn in the top k)")
    ax.set_title(
        f"LoCoMo, {c['questions']} questions (categories 1{DASH}4); search: "
        + (f"median (min..max) of {c['repeat']} indexings" if c["repeat"] > 1 else "one indexing")
    )
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right", bbox_to_anchor=(1, 0.93))
    return fig


FIGURES = {"-recall": figure}


if __name__ == "__main__":
    main()
