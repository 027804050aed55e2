# The two commands of the README: `make run` and `make test`.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install -q -c constraints.txt

.PHONY: run test lint typecheck bench clean

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PIP) -e .
	touch $@

$(VENV)/.dev: $(VENV)/.installed
	$(PIP) -e '.[dev]'
	touch $@

run: $(VENV)/.installed
	$(VENV)/bin/kredenc demo

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check src tests benchmarks scripts
	$(VENV)/bin/ruff format --check src tests benchmarks scripts

typecheck: $(VENV)/.dev
	$(VENV)/bin/mypy

test: lint typecheck
	$(VENV)/bin/pytest

bench: $(VENV)/.installed
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .kredenc .pytest_cache .mypy_cache .ruff_cache
