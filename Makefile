# Two commands on a fresh machine:  make run   (the pipeline on the shipped config)
#                                   make test  (the test suite)
# Each builds .venv from requirements.lock (hash-pinned) the first time.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test bench lock clean

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/pipeline run --config config.toml

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/run_bench.py

# Re-resolve the lock (needs uv: pip install uv). Never resolves litellm 1.82.7/1.82.8 (see pyproject.toml).
lock:
	uv pip compile pyproject.toml build-requirements.in --extra test --extra local --extra postgres --extra otel --generate-hashes \
		--python-version 3.11 --python-platform x86_64-manylinux_2_28 -o requirements.lock

clean:
	rm -rf $(VENV) var .pytest_cache
