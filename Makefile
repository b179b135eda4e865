# Two commands set everything up on a fresh machine: `make audit` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install audit test bench clean

install: $(STAMP)

# The CPU build of torch goes in first, so sentence-transformers does not pull a CUDA build.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

audit: install
	HF_HUB_OFFLINE=1 $(VENV)/bin/ragaudit gold check gold_sets/handbook/gold.jsonl --corpus gold_sets/handbook/corpus
	# exit 1 is a failed gate: a result to read in the report, not a failure of the job
	HF_HUB_OFFLINE=1 $(VENV)/bin/ragaudit run configs/default.toml || [ $$? -eq 1 ]

test: install
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q

bench: install
	$(PY) bench/validate.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
