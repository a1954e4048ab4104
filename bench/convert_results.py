"""One-off: bench/results/*.json from the schema before bench/_common.Result to it
({bench, quick, config, tables, environment}), reading the files of a commit:

    .venv/bin/python bench/convert_results.py 3d7142a

docs/benchmarks.md renders the same from the converted files as from the old ones.
Kept for one commit, to show how the committed results were converted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RESULTS = Path("bench/results")
ENV_KEYS = ("written_at", "machine", "versions", "loadavg_before", "loadavg_after")


def old(name: str) -> dict:
    return json.loads(
        subprocess.run(
            ["git", "show", f"{REV}:bench/results/{name}.json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )


def envelope(bench: str, d: dict, quick: bool, config: dict, tables: dict, **env) -> dict:
    environment = {k: d[k] for k in ENV_KEYS if k in d}
    environment.update(env)
    return {
        "bench": bench,
        "quick": quick,
        "config": config,
        "tables": tables,
        "environment": environment,
    }


CONVERT = {}


def view(d):
    rows = [
        {"view": v, "lines": int(n), **sides}
        for v, by in d["views"].items()
        for n, sides in by.items()
    ]
    return envelope(
        "view", d, d["quick"], {"rounds": d["rounds"], "sizes": d["sizes"]}, {"views": rows}
    )


CONVERT["view"] = view


def embed(d):
    config = {k: d[k] for k in ("texts", "tokens_median", "tokens_max", "tokens_total", "repeat")}
    config |= {"batch": d["pipeline"]["batch"], "threads": list(d["runs"])}
    raw = [{"threads": t, **v} for t, v in d["runs"].items()]
    pipes = []
    for p in [d["pipeline"], *d.get("pipeline_by_threads", {}).values()]:
        row = {k: p[k] for k in ("threads", "batch", "texts", "facts", "messages", "rounds")}
        row |= {k: p[k] for k in ("raw_texts_per_s", "pipeline_texts_per_s", "ratio")}
        row |= {f"{k}_ms": v for k, v in p["ms_per_text"].items()}
        row |= {
            "write_floor_ms": p["write_floor_ms_per_text"],
            "json_encode_ms": p["json_encode_ms_per_text"],
        }
        pipes.append(row)
    return envelope("embed", d, d["quick"], config, {"raw": raw, "pipeline": pipes})


CONVERT["embed"] = embed


def dedupe(d):
    config = {k: d[k] for k in ("batch", "repeat", "background_facts")}
    config |= {
        "prefills": sorted({v["prefill"] for v in d["single"].values()}),
        "threshold": d["threshold"],
    }
    single = [
        {**v, "speedup": d["speedup"][str(v["prefill"])].get(v["method"])}
        for v in d["single"].values()
    ]
    conc = [{"scenario": k, **v} for k, v in d["concurrent"].items()]
    return envelope("dedupe", d, d["quick"], config, {"single": single, "concurrent": conc})


CONVERT["dedupe"] = dedupe


def core(d):
    keys = (
        "commands",
        "seed",
        "rounds",
        "warmup",
        "clients",
        "mix",
        "expected_failures",
        "bytes_at_end",
    )
    config = {k: d[k] for k in keys}
    latency, sides = [], []
    checks = d["checks"]
    for key, side in d["sides"].items():
        for cmd, v in [*side["by_command"].items(), ("all", side["all"])]:
            latency.append({"side": key, "command": cmd, **v})
        sides.append(
            {
                "side": key,
                "label": side["label"],
                "commands_per_s": side["throughput_per_s"],
                "final_view_mismatches": checks["final_view_mismatches"].get(key),
                "outcome_mismatches": checks["outcome_mismatches"].get(key),
            }
        )
    rounds = [
        {"round": i + 1, "files_at_end": f, "unexpected_outcomes": u, "model_mismatches": m}
        for i, (f, u, m) in enumerate(
            zip(
                checks["files_at_end"],
                checks["unexpected_outcomes"],
                checks["model_mismatches"],
                strict=True,
            )
        )
    ]
    tables = {"latency": latency, "sides": sides, "checks": rounds}
    prof = d.get("profile")
    if prof:
        tables["profile_run"] = [
            {
                k: prof[k]
                for k in ("run_calls", "run_server_ms_per_call", "client_ms_per_ok_command")
            }
        ]
        tables["profile"] = [
            {"function": f["name"], **{k: v for k, v in f.items() if k != "name"}}
            for f in prof["functions"]
        ]
    return envelope("core", d, d["quick"], config, tables, server_settings=d["server_settings"])


CONVERT["core"] = core


def search(d):
    config = {
        k: d[k] for k in ("facts", "users", "rounds", "queries", "layout", "server_settings_set")
    }
    groups, methods = [], []
    for name, g in d["groups"].items():
        groups.append({"group": name, **{k: g[k] for k in ("label", "sizes", "queries")}})
        for m, v in g.items():
            if m not in ("label", "sizes", "queries", "plans"):
                methods.append({"group": name, "method": m, "plan": g["plans"].get(m), **v})
    tables = {
        "load": [d["load"]],
        "table_sizes": [{"table": k, "size": v} for k, v in d["table_sizes"].items()],
        "groups": groups,
        "methods": methods,
        "plain_as_written": [d["plain_as_written"]],
        "ladder": [{"facts": int(k), **v} for k, v in d["ladder"].items()],
        "ef_search": [{"ef_search": int(k), **v} for k, v in d["ef_search"].items()],
    }
    return envelope(
        "search", d, d["facts"] < 1_000_000, config, tables, server_settings=d["server_settings"]
    )


CONVERT["search"] = search


def locomo(d):
    keys = ("repeat", "data", "conversations", "turns", "questions", "questions_by_category")
    config = {k: d[k] for k in keys}
    config["diagnosis"] = "diagnosis" in d
    runs = [
        {"run": i + 1, "method": m, **v}
        for i, run in enumerate(d["recall_runs"])
        for m, v in run.items()
    ]
    recall = []
    for m, v in d["recall"].items():
        figures = {}
        for key, s in v.items():
            xs = sorted(x["R@" + key[2:]] for x in runs if x["method"] == m)
            assert (
                (xs[len(xs) // 2] if len(xs) % 2 else None) in (None, s["median"])
                and xs[0] == s["min"]
                and xs[-1] == s["max"]
            ), (m, key)
            figures[key] = {"n": len(xs), **s, "p95": xs[-1]}
        recall.append({"method": m, **figures, "by_category": d["recall_by_category"][m]})
    for m, v in d["baselines"].items():
        recall.append({"method": m, **v, "by_category": d["recall_by_category"][m]})
    rate = d["indexing_facts_per_s"]
    tables = {
        "runs": runs,
        "indexing": [{"conversation": k, **v} for k, v in d["indexing"].items()],
        "recall": recall,
        "saving": [{"facts_per_s": {"n": d["repeat"], **rate, "p95": rate["max"]}}],
        "latency": [
            {"method": m, "p50_ms": v["median"], "p95_ms": v["p95"], "queries": v["n"]}
            for m, v in d["search_latency_ms"].items()
        ],
    }
    diag = d.get("diagnosis")
    if diag:
        parts = {
            "normalization": diag["text_only_by_ts_rank_cd_normalization"],
            "depth": diag["rrf_of_search_lists_by_depth"],
            "text config": diag["text_only_by_config"],
            "rrf simple text": {"depth 40": diag["rrf_simple_text_depth_40"]},
            "grid": diag["grid_rrf_k_depth_text_weight"],
            "rrf_k": diag["search_facts_hybrid_by_rrf_k"],
        }
        tables["diagnosis"] = [
            {"part": p, "setting": k, **v} for p, by in parts.items() for k, v in by.items()
        ]
        tables["text_list"] = [
            {"length_median": diag["text_list_length_median"], **diag["text_rank_ties"]}
        ]
    return envelope("locomo", d, d["quick"], config, tables)


CONVERT["locomo"] = locomo


def load(d):
    # The run of `python -m bench.load` (10 minutes, seed 1); it wrote no machine facts.
    config = {
        "seconds": 600.0,
        "clients": d["clients"],
        "embed_workers": d["embed_workers"],
        "seed": 1,
    }
    outcome = {
        k: d[k]
        for k in (
            "seconds",
            "total_ops",
            "unexpected_errors",
            "unexpected_error_samples",
            "interruptions",
        )
    }
    tables = {
        "operations": [{"operation": k, **v} for k, v in d["operations"].items()],
        "outcome": [outcome | d["integrity"]],
    }
    return envelope("load", d, False, config, tables)


CONVERT["load"] = load


REV = "HEAD"
if __name__ == "__main__":
    REV = sys.argv[1] if len(sys.argv) > 1 else "HEAD"
    for bench, fn in CONVERT.items():
        for name in (bench, f"{bench}-quick"):
            try:
                d = old(name)
            except subprocess.CalledProcessError:
                continue
            (RESULTS / f"{name}.json").write_text(json.dumps(fn(d), indent=2) + "\n")
            print("converted", name)
