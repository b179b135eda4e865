# Two commands set everything up on a fresh machine: `make audit` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install browser audit test docs bench clean

install: $(STAMP)

# Every extra (the model, Dask, pandas) and the test tools. The CPU build of torch goes in first, so
# sentence-transformers does not pull a CUDA build: the version tested here (pyproject.toml takes a range).
TORCH ?= torch==2.13.0

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet '$(TORCH)'
	$(PY) -m pip install --quiet -e '.[all,test]'
	touch $(STAMP)

# The demo audit. Exit 1 is a failed gate: a result to read in the report, not a failure of the job.
audit: install
	HF_HUB_OFFLINE=1 $(VENV)/bin/ragaudit gold check gold_sets/handbook/gold.jsonl --corpus gold_sets/handbook/corpus
	HF_HUB_OFFLINE=1 $(VENV)/bin/ragaudit run configs/default.toml || [ $$? -eq 1 ]

# Debian's Chromium and its driver, for the report.html tests; the tests use /usr/bin/chromium.
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; \
		else echo "browser tests need: sudo apt-get install chromium chromium-driver (they skip without it)"; fi; \
	fi

# Lint, format and type checks come first: they take seconds and fail for reasons anyone can fix.
# The suite keeps compiled modules (and pytest's rewritten test modules) between runs even where
# PYTHONDONTWRITEBYTECODE is set: without them, every run and every subprocess it starts compiles
# ragaudit and the test modules again (collecting alone went from about 3 s to 15 s of CPU).
# The suite runs in TEST_WORKERS processes (pytest-xdist), each test file whole in one of them: a
# file's module fixtures (a run, a cluster, the real-model demo) are built once, and its tests keep their order.
TEST_WORKERS ?= 2

test: install browser
	$(VENV)/bin/ruff check ragaudit tests bench
	$(VENV)/bin/ruff format --check ragaudit tests bench
	$(VENV)/bin/mypy
	env -u PYTHONDONTWRITEBYTECODE HF_HUB_OFFLINE=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The reference's tables that a registry owns (issue codes, metrics, gate checks, [gate] keys), written
# from the registries; the tests fail while the reference differs from what this writes.
docs: install
	$(PY) -m ragaudit.outputs.render.doctables docs/reference.md

bench: install
	$(PY) bench/validate.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
