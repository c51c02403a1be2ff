"""Which judge scores a month: the offline `local` embedding judge, or LLMs through litellm.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.judge_spec`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine

from deepscholar.errors import InvalidInput
from deepscholar.evaluation.metrics import registry

if TYPE_CHECKING:
    from deepscholar.llm.batch_transport import BatchQueue

__all__ = ["JudgeSpec", "LOCAL_JUDGE", "LOCAL_JUDGE_VERSION", "record_judge_config", "is_local_config"]

LOCAL_JUDGE_VERSION = "v1"


@dataclass(frozen=True)
class JudgeSpec:
    model: str  # "local" or a litellm model string
    metric_models: Mapping[str, str] = field(default_factory=dict)
    # Constrained output (llm/answer_shapes.CONSTRAINED_OUTPUTS), None for free text. Part of the config id:
    # a schema changes what a model answers, so its boards are not the unconstrained judge's.
    output: str | None = None

    @classmethod
    def parse(cls, text: str, metric_models: Mapping[str, str] | None = None) -> JudgeSpec:
        """The one way text becomes a judge: a judge as `evaluate --judge` takes it ('local', or a model with
        options after semicolons: "openai/smollm2;output=json_schema", "openai/gpt-4o;nugget_coverage=openai/gpt-4.1")
        or a stored judge config id (`config_id`: "local:..." is the local judge whatever model and version it
        names, "llm:<model>;..." the LLM judge it writes), both naming the same judge."""
        from deepscholar.llm.answer_shapes import CONSTRAINED_OUTPUTS

        given = (text or "").strip()
        body = "local" if given.startswith("local:") else given.removeprefix("llm:")
        model, *options = body.split(";")
        model = model.strip()
        if not model:
            raise InvalidInput("a judge is required: 'local' or a litellm model string such as openai/gpt-4o")
        pairs = [o.split("=", 1) for o in options if o.strip()]
        if any(len(pair) != 2 for pair in pairs):
            raise InvalidInput(f"judge options are name=value after a semicolon: {given!r}")
        named = {k.strip(): v.strip() for k, v in pairs}
        output = named.pop("output", None)
        if output is not None and output not in CONSTRAINED_OUTPUTS:
            raise InvalidInput(f"output={output!r}: constrained output is one of {', '.join(CONSTRAINED_OUTPUTS)}")
        overrides = {**named, **dict(metric_models or {})}
        unknown = sorted(set(overrides) - set(registry.metric_names()))
        if unknown:
            raise InvalidInput(f"per-metric judge models for unknown metrics: {', '.join(unknown)}")
        if model == "local" and (overrides or output):
            raise InvalidInput("the local judge takes no per-metric models and no constrained output")
        return cls(model, overrides, output)

    @property
    def is_local(self) -> bool:
        return self.model == "local"

    @property
    def config_id(self) -> str:
        if self.is_local:
            from deepscholar.llm.local_judge import MODEL_ID

            return f"local:{MODEL_ID}:{LOCAL_JUDGE_VERSION}"
        extra = "".join(f";{m}={model}" for m, model in sorted(self.metric_models.items()) if model != self.model)
        return f"llm:{self.model}{f';output={self.output}' if self.output else ''}{extra}"

    def model_for(self, metric: str) -> str:
        return self.metric_models.get(metric, self.model)

    def client_for(self, engine: Engine, metric: str, *, api_base: str | None = None, api_key: str | None = None,
                   concurrency: int = 16, cache_salt: str | None = None, batch: BatchQueue | None = None,
                   timeout: float | None = None):
        """`cache_salt`: a client that bypasses the shared llm_calls answers (LLMClient; the drift check);
        `batch`: a client recording what the cache cannot answer in this queue for a batch API
        (llm/batch_transport.py);
        `timeout`: None for the settings' (DEEPSCHOLAR_LLM_SERVING's entry for the model first)."""
        from deepscholar.llm.client import LLMClient

        if self.is_local:
            raise ValueError("the local judge has no LLM client")
        return LLMClient(engine, self.model_for(metric), api_base=api_base, api_key=api_key, concurrency=concurrency,
                         cache_salt=cache_salt, batch=batch, constrained=self.output, timeout=timeout)

    def clients_for(self, engine: Engine, metrics: Iterable[str], *, api_base: str | None = None,
                    api_key: str | None = None, concurrency: int = 16, cache_salt: str | None = None,
                    batch: BatchQueue | None = None, timeout: float | None = None) -> dict:
        """{model: LLMClient}, one per model these metrics are judged with (none for the local judge), so the
        metrics sharing a model share one client and its concurrency bound: the runner's clients and the
        drift check's are made here alike."""
        clients: dict = {}
        if self.is_local:
            return clients
        for metric in metrics:
            model = self.model_for(metric)
            if model not in clients:
                clients[model] = self.client_for(engine, metric, api_base=api_base, api_key=api_key,
                                                 concurrency=concurrency, cache_salt=cache_salt, batch=batch,
                                                 timeout=timeout)
        return clients


LOCAL_JUDGE = JudgeSpec("local")  # the offline judge, what `JudgeSpec.parse("local")` gives


def record_judge_config(engine: Engine, spec: JudgeSpec, metric, client=None) -> None:
    """Store what `spec.config_id` stands for (models, request parameters) and the metric version judged
    under it now, so a board can always be traced to the exact judge setup and prompts behind it."""
    import sqlalchemy as sa

    from deepscholar.db import SCHEMA

    if spec.is_local:
        from deepscholar.llm.local_judge import MODEL_ID

        model, params = MODEL_ID, {"local_judge_version": LOCAL_JUDGE_VERSION}
    else:
        model, params = spec.model, dict(getattr(client, "params", {}) or {})
    overrides = {m: x for m, x in spec.metric_models.items() if x != spec.model}
    with engine.begin() as conn:
        conn.execute(sa.text(f"""
            INSERT INTO {SCHEMA}.judge_configs (judge_config, kind, model, metric_models, params, metric_versions)
            VALUES (:j, :kind, :model, CAST(:models AS jsonb), CAST(:params AS jsonb), CAST(:versions AS jsonb))
            ON CONFLICT (judge_config) DO UPDATE SET
                params = excluded.params,
                metric_versions = {SCHEMA}.judge_configs.metric_versions || excluded.metric_versions,
                updated_at = now()
            WHERE {SCHEMA}.judge_configs.params IS DISTINCT FROM excluded.params
               OR NOT {SCHEMA}.judge_configs.metric_versions @> excluded.metric_versions"""),
            {"j": spec.config_id, "kind": "local" if spec.is_local else "llm", "model": model,
             "models": json.dumps(overrides), "params": json.dumps(params, sort_keys=True, default=str),
             "versions": json.dumps({metric.name: metric.version})})


def is_local_config(judge_config: str) -> bool:
    """Was this board judged by the offline local judge (JudgeSpec.config_id "local:...")? Readers label
    its numbers as such: they answer the same questions, but not with an LLM."""
    return judge_config == "local" or judge_config.startswith("local:")

