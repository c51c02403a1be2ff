# The two commands a newcomer needs: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export DEEPSCHOLAR_HOME ?= $(CURDIR)/.deepscholar

.PHONY: install demo demo-ui test test-fast lint bench clean stop-db lock

# Installs come from the hash-checked lock of everything (requirements-dev.lock = requirements.txt +
# requirements-models.txt + requirements-celery.txt, transitive closure, the same pins as the models and
# celery locks): the Celery executor is part of the tests. `make lock` rewrites the locks.
$(STAMP): requirements-dev.lock pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes -r requirements-dev.lock
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(VENV)/bin/deepscholar demo

# The same, then Airflow's UI and the leaderboard page stay up until Ctrl-C (port: DEEPSCHOLAR_DEMO_PORT).
demo-ui: install
	DEEPSCHOLAR_DEMO_PORT=$${DEEPSCHOLAR_DEMO_PORT:-8080} $(VENV)/bin/deepscholar demo --keep-running

# Three pytest workers (pytest-xdist) on 2 cores: the Airflow end-to-end tests spend most of their time
# waiting on the scheduler, so they overlap well with each other and with the rest (the whole suite took
# 15:45 with three workers and 16:50 with two, on the same tree; CPU is then busy throughout: four took
# 18:16 where three took 16:07). TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 3
test: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy --no-error-summary
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal --durations=12

# The fast loop while developing: everything but the tests marked slow (Airflow, Chromium, the Celery
# executor, CLI subprocesses, whole release builds), on the same workers as `make test`.
test-fast: install
	$(PY) -m pytest -m "not slow" -q -n $(TEST_WORKERS) --dist worksteal

# ruff, then mypy's type check of include/deepscholar ([tool.mypy] in pyproject.toml; silent when clean).
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy --no-error-summary

bench: install
	$(PY) bench/extraction_throughput.py
	$(PY) bench/demo_release.py

stop-db: install
	$(VENV)/bin/deepscholar db stop

# Rewrite the locks after editing requirements*.txt (needs PyPI). Pins already in a lock are kept while
# they still fit; `make lock LOCK_ARGS=--upgrade` moves everything to the newest allowed versions.
# uv (in a tool venv under $(VENV), not in the project's environment) because it reads hashes from the
# simple index and hashes local files; torch's CPU wheel is found via TORCH_FIND_LINKS.
UV_VERSION ?= 0.13.9
UV_ENV := $(VENV)/.uv-$(UV_VERSION)
TORCH_FIND_LINKS ?= $(or $(PIP_FIND_LINKS),https://download.pytorch.org/whl/cpu/torch/)
UV_COMPILE = $(UV_ENV)/bin/uv pip compile --quiet --generate-hashes --python-version 3.11 \
	--python-platform x86_64-unknown-linux-gnu --custom-compile-command "make lock" $(LOCK_ARGS)

lock:
	test -x $(UV_ENV)/bin/uv || { $(PYTHON) -m venv $(UV_ENV) && $(UV_ENV)/bin/pip install --quiet uv==$(UV_VERSION); }
	$(UV_COMPILE) requirements.txt -o requirements.lock
	$(UV_COMPILE) requirements.txt requirements-models.txt -c requirements.lock \
		--find-links $(TORCH_FIND_LINKS) -o requirements-models.lock
	$(UV_COMPILE) requirements.txt requirements-celery.txt -c requirements.lock -o requirements-celery.lock
	$(UV_COMPILE) requirements.txt requirements-models.txt requirements-celery.txt -c requirements-models.lock \
		-c requirements-celery.lock --find-links $(TORCH_FIND_LINKS) -o requirements-dev.lock

clean: stop-db
	rm -rf .deepscholar .pytest_cache .mypy_cache
