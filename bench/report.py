"""docs/benchmarks.md from the result files in bench/results/.

Each bench module has `markdown(results) -> str` (its section) and
`targets(results) -> list[{"target", "measured", "met"}]`; this script loads
`bench/results/<name>.json` (with --quick `<name>-quick.json`; without it the
full file, else the quick one, saying so) and writes the page: the machine and
versions of each run, the targets table, then every section. A module whose
results or functions are missing gets a "not run" section.

    .venv/bin/python -m bench.report [--quick]
"""

from __future__ import annotations

import argparse
import importlib
import json
import traceback
from pathlib import Path
from typing import Any

from bench._common import RESULTS_DIR, ROOT

DOC = ROOT / "docs" / "benchmarks.md"
# Search at scale, core memory, dedupe, LoCoMo, embedding, long-file views.
MODULES = {
    "search": "Filtered hybrid search at scale",
    "core": "Core memory",
    "dedupe": "Saving with dedupe",
    "locomo": "Retrieval quality on LoCoMo",
    "embed": "Embedding",
    "view": "Viewing long files",
}


def load(name: str, quick: bool) -> tuple[dict[str, Any] | None, str | None, str]:
    """The results of one bench, the file they came from, and a note on the choice."""
    full, short = RESULTS_DIR / f"{name}.json", RESULTS_DIR / f"{name}-quick.json"
    order = [short] if quick else [full, short]
    for path in order:
        if path.exists():
            note = ""
            if not quick and path == short:
                note = f"no full run (`{full.name}`): the quick run's figures"
            return json.loads(path.read_text()), path.name, note
    return None, None, f"`{order[0].name}` not found"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def machine_table(loaded: dict[str, tuple[dict[str, Any], str]]) -> str:
    names = list(loaded)
    rows: list[tuple[str, list[str]]] = []

    def m(key: str) -> list[str]:
        return [str(loaded[n][0].get("machine", {}).get(key, "")) for n in names]

    def v(key: str) -> list[str]:
        return [str((loaded[n][0].get("versions") or {}).get(key, "")) for n in names]

    rows.append(("result file", [f"`{loaded[n][1]}`" for n in names]))
    rows.append(("written at", [str(loaded[n][0].get("written_at", "")) for n in names]))
    rows.append(("commit", m("commit")))
    rows.append(("CPU", [f"{c} ({p} cores)" for c, p in zip(m("cpu"), m("nproc"), strict=True)]))
    rows.append(("memory, GB", m("mem_gb")))
    rows.append(
        (
            "load average at start (1/5/15 min)",
            [
                " / ".join(f"{x:.2f}" for x in loaded[n][0]["loadavg_before"])
                if loaded[n][0].get("loadavg_before")
                else ""
                for n in names
            ],
        )
    )
    rows.append(("PostgreSQL", v("postgresql")))
    rows.append(("pgvector", v("vector")))
    rows.append(("extension memory", v("memory")))
    for key in ("python", "numpy", "onnxruntime", "psycopg"):
        rows.append((key, m(key)))
    extra = sorted(
        {k for n in names for k in loaded[n][0].get("machine", {})}
        - {"cpu", "nproc", "mem_gb", "commit", "python", "numpy", "onnxruntime", "psycopg"}
    )
    for key in extra:
        rows.append((key, m(key)))
    extra_v = sorted(
        {k for n in names for k in (loaded[n][0].get("versions") or {})}
        - {"postgresql", "vector", "memory"}
    )
    for key in extra_v:
        rows.append((key, v(key)))
    out = ["| | " + " | ".join(f"bench/{n}.py" for n in names) + " |"]
    out.append("|---|" + "---|" * len(names))
    for label, cells in rows:
        if not any(cells):
            continue
        out.append(f"| {label} | " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="use the -quick result files")
    ap.add_argument("--out", type=Path, default=DOC)
    args = ap.parse_args()

    sections: list[str] = []
    target_rows: list[tuple[str, str, str, str]] = []
    loaded: dict[str, tuple[dict[str, Any], str]] = {}
    headings: dict[str, str] = {}
    for name, title in MODULES.items():
        header = f"## {title} (bench/{name}.py)"
        results, filename, note = load(name, args.quick)
        try:
            module = importlib.import_module(f"bench.{name}")
        except Exception as e:  # a bench whose dependencies are missing
            sections.append(f"{header}\n\nNot run: `bench/{name}.py` does not import ({e}).")
            continue
        if results is None:
            sections.append(f"{header}\n\nNot run: {note}.")
            continue
        loaded[name] = (results, filename)
        markdown = getattr(module, "markdown", None)
        targets = getattr(module, "targets", None)
        if markdown is None:
            sections.append(f"{header}\n\nNot run: `bench/{name}.py` has no `markdown()` yet.")
        else:
            try:
                text = markdown(results).strip()
            except Exception:
                traceback.print_exc()
                text = (
                    f"{header}\n\nNot rendered: `markdown()` failed on `{filename}` "
                    "(written by an older version of the bench?): rerun it."
                )
            if note:
                first, _, rest = text.partition("\n")
                text = f"{first}\n\n*{note}.*\n{rest}"
            sections.append(text)
            headings[name] = text.partition("\n")[0].lstrip("# ")
        if targets is not None:
            try:
                for t in targets(results):
                    target_rows.append(
                        (
                            _cell(t["target"]),
                            _cell(t["measured"]),
                            "✅" if t["met"] else "❌",
                            f"[{name}](#{_anchor(headings.get(name, name))})",
                        )
                    )
            except Exception:
                traceback.print_exc()
                target_rows.append(
                    (f"(bench/{name}.py targets)", f"`targets()` failed on `{filename}`", "", name)
                )
    suffix = " --quick" if args.quick else ""
    page = [
        "# Benchmarks",
        "",
        "<!-- Generated by `python -m bench.report"
        + suffix
        + "` from bench/results/*.json: edit the bench modules' markdown(), not this file. -->",
        "",
        "What `bench/` measures against what users would pick instead, on one machine and "
        "in one run per bench, with the exact command to reproduce each figure. The "
        "benchmarks print and write results (`bench/results/<name>.json` and PNG plots); "
        "they never assert timings. The machines they run on are shared and noisy: every "
        "timing is repeated and reported as the median with its spread (min..max of the "
        "repeats), speed claims are ratios measured side by side in the same run, and "
        "recall figures that depend on random ids are reported over several indexings."
        + (
            " **These are the quick runs' figures** (`make bench`): smaller scales and "
            "fewer repeats than `make bench-full`."
            if args.quick
            else ""
        ),
        "",
        "## Running",
        "",
        "```sh",
        "make bench        # the quick set (a few minutes), then this page from the -quick results",
        "make bench-full   # the full scale (search at 1,000,000 facts: up to an hour), then this page",
        "",
        "# or one at a time (--quick: the small version)",
        ".venv/bin/python -m bench.search [--quick]   # filtered hybrid search at scale",
        ".venv/bin/python -m bench.core   [--quick]   # memory.run vs the local memory tool",
        ".venv/bin/python -m bench.dedupe [--quick]   # save_facts vs client-side loops",
        ".venv/bin/python -m bench.locomo [--quick]   # LoCoMo R@1/5/10",
        ".venv/bin/python -m bench.embed  [--quick]   # LocalEmbedder, embed_pending",
        ".venv/bin/python -m bench.report [--quick]   # this page, from bench/results/*.json",
        "```",
        "",
        "The bench targets install what they need (`pip install -e '.[dev,bench]'`: "
        "LangGraph's PostgresStore, rank_bm25, matplotlib) and build and install the "
        "extension into the embedded server. Every benchmark starts its own embedded "
        "PostgreSQL (`pgmemory.server.start`) in a throwaway data directory, creates a "
        "database with `CREATE EXTENSION memory CASCADE` and "
        "`memory.configure_embeddings(384)`, and works as the superuser (the trusted "
        "service) unless a section says otherwise.",
        "",
        "## Machine and versions",
        "",
        machine_table(loaded) if loaded else "No results.",
        "",
        "## Targets",
        "",
        "The targets, each measured in the run of its section.",
        "",
        "| target | measured | met | bench |",
        "|---|---|---|---|",
        *(f"| {t} | {m} | {ok} | {b} |" for t, m, ok, b in target_rows),
    ]
    for name in MODULES:
        if name not in loaded:
            page.append(f"| bench/{name}.py | not run | | {name} |")
    page += ["", *"\n\n".join(sections).split("\n"), ""]
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text("\n".join(page))
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    for name, title in MODULES.items():
        state = f"from {loaded[name][1]}" if name in loaded else "not run"
        print(f"  {title}: {state}")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    return "".join(c for c in heading.lower() if c.isalnum() or c in " -_").replace(" ", "-")


if __name__ == "__main__":
    main()
