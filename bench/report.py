"""docs/benchmarks.md from the result files in bench/results/.

Each bench module has `markdown(result) -> str` (its section) and
`targets(result) -> list[{"target", "measured", "met"}]`; this script loads
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

from bench._common import RESULTS_DIR, ROOT, Result

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
VERSIONS = {"postgresql": "PostgreSQL", "vector": "pgvector", "memory": "extension memory"}
LATER = ("python", "numpy", "onnxruntime", "psycopg")  # machine keys listed after the versions

INTRO = (
    "What `bench/` measures against what users would pick instead, on one machine and "
    "in one run per bench, with the exact command to reproduce each figure. The "
    "benchmarks print and write results (`bench/results/<name>.json` and PNG plots); "
    "they never assert timings. The machines they run on are shared and noisy: every "
    "timing is repeated and reported as the median with its spread (min..max of the "
    "repeats), speed claims are ratios measured side by side in the same run, and "
    "recall figures that depend on random ids are reported over several indexings."
)
RUNNING = """## Running

```sh
make bench        # the quick set (a few minutes), then this page from the -quick results
make bench-full   # the full scale (search at 1,000,000 facts: up to an hour), then this page

# or one at a time (--quick: the small version)
.venv/bin/python -m bench.search [--quick]   # filtered hybrid search at scale
.venv/bin/python -m bench.core   [--quick]   # memory.run vs the local memory tool
.venv/bin/python -m bench.dedupe [--quick]   # save_facts vs client-side loops
.venv/bin/python -m bench.locomo [--quick]   # LoCoMo R@1/5/10
.venv/bin/python -m bench.embed  [--quick]   # LocalEmbedder, embed_pending
.venv/bin/python -m bench.report [--quick]   # this page, from bench/results/*.json
```

The bench targets install what they need (`pip install -e '.[dev,bench]'`: \
LangGraph's PostgresStore, rank_bm25, matplotlib) and build and install the \
extension into the embedded server. Every benchmark starts its own embedded \
PostgreSQL (`pgmemory.server.start`) in a throwaway data directory, creates a \
database with `CREATE EXTENSION memory CASCADE` and \
`memory.configure_embeddings(384)`, and works as the superuser (the trusted \
service) unless a section says otherwise."""


def load(name: str, quick: bool) -> tuple[Result | None, str | None, str]:
    """The result of one bench, the file it came from, and a note on the choice."""
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


def machine_table(loaded: dict[str, tuple[Result, str]]) -> str:
    envs = {n: r["environment"] for n, (r, _) in loaded.items()}

    def m(key: str) -> list[str]:
        return [str(e.get("machine", {}).get(key, "")) for e in envs.values()]

    def v(key: str) -> list[str]:
        return [str((e.get("versions") or {}).get(key, "")) for e in envs.values()]

    def keys(part: str) -> set[str]:
        return {k for e in envs.values() for k in (e.get(part) or {})}

    load = [e.get("loadavg_before") for e in envs.values()]
    rows = [
        ("result file", [f"`{file}`" for _, file in loaded.values()]),
        ("written at", [str(e.get("written_at", "")) for e in envs.values()]),
        ("commit", m("commit")),
        ("CPU", [f"{c} ({p} cores)" for c, p in zip(m("cpu"), m("nproc"), strict=True)]),
        ("memory, GB", m("mem_gb")),
        (
            "load average at start (1/5/15 min)",
            [" / ".join(f"{x:.2f}" for x in a) if a else "" for a in load],
        ),
        *((label, v(key)) for key, label in VERSIONS.items()),
        *((key, m(key)) for key in LATER),
        *(
            (k, m(k))
            for k in sorted(keys("machine") - {"cpu", "nproc", "mem_gb", "commit", *LATER})
        ),
        *((k, v(k)) for k in sorted(keys("versions") - set(VERSIONS))),
    ]
    out = ["| | " + " | ".join(f"bench/{n}.py" for n in envs) + " |", "|---|" + "---|" * len(envs)]
    out += [
        f"| {label} | " + " | ".join(map(_cell, cells)) + " |"
        for label, cells in rows
        if any(cells)
    ]
    return "\n".join(out)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    return "".join(c for c in heading.lower() if c.isalnum() or c in " -_").replace(" ", "-")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="use the -quick result files")
    ap.add_argument("--out", type=Path, default=DOC)
    args = ap.parse_args()

    sections: list[str] = []
    target_rows: list[str] = []
    loaded: dict[str, tuple[Result, str]] = {}
    for name, title in MODULES.items():
        header = f"## {title} (bench/{name}.py)"
        result, filename, note = load(name, args.quick)
        try:
            module = importlib.import_module(f"bench.{name}")
        except Exception as e:  # a bench whose dependencies are missing
            sections.append(f"{header}\n\nNot run: `bench/{name}.py` does not import ({e}).")
            continue
        if result is None or filename is None:
            sections.append(f"{header}\n\nNot run: {note}.")
            continue
        loaded[name] = (result, filename)
        try:
            text = module.markdown(result).strip()
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
        heading = text.partition("\n")[0].lstrip("# ")
        link = f"[{name}](#{_anchor(heading)})"
        try:
            for t in module.targets(result):
                cells = (_cell(t["target"]), _cell(t["measured"]), "✅" if t["met"] else "❌", link)
                target_rows.append("| " + " | ".join(cells) + " |")
        except Exception:
            traceback.print_exc()
            target_rows.append(
                f"| (bench/{name}.py targets) | `targets()` failed on `{filename}` |  | {name} |"
            )
    quick = (
        " **These are the quick runs' figures** (`make bench`): smaller scales and "
        "fewer repeats than `make bench-full`."
    )
    page = [
        "# Benchmarks",
        "",
        f"<!-- Generated by `python -m bench.report{' --quick' if args.quick else ''}` from "
        "bench/results/*.json: edit the bench modules' markdown(), not this file. -->",
        "",
        INTRO + (quick if args.quick else ""),
        "",
        RUNNING,
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
        *target_rows,
        *(f"| bench/{name}.py | not run | | {name} |" for name in MODULES if name not in loaded),
        "",
        "\n\n".join(sections),
        "",
    ]
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text("\n".join(page))
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    for name, title in MODULES.items():
        print(f"  {title}: " + (f"from {loaded[name][1]}" if name in loaded else "not run"))


if __name__ == "__main__":
    main()
