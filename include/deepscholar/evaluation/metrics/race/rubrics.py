"""RACE's release-time rubric: per query, the weights of four dimensions and each dimension's criteria.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.race.rubrics`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from deepscholar import db
from deepscholar.db import SCHEMA
from deepscholar.evaluation.metrics.race.query_data import RaceCriterion
from deepscholar.gx import Check
from deepscholar.llm import answer_shapes
from deepscholar.llm.client import Judged, ParseError, parse_json_array, parse_json_object
from deepscholar.release.track_declaration import TrackArtefacts

__all__ = ["DIMENSIONS", "ARTEFACTS", "Rubric", "WeightSample", "parse_weights", "parse_criteria",
           "mean_weights", "sample_params", "weights_version", "build_race_rubrics", "local_rubric",
           "WEIGHT_TOLERANCE"]

log = logging.getLogger("deepscholar.release")

DIMENSIONS: dict[str, str] = {
    "comprehensiveness": "covers the key lines of prior work for this paper and omits nothing important",
    "insight": "compares and contrasts prior works, positions the paper against them, explains why they matter",
    "instruction_following": "is a related-work section for this paper, about prior work only, with citations",
    "readability": "clear structure, good flow, precise and readable sentences",
}
MIN_CRITERIA, MAX_CRITERIA = 3, 8
WEIGHT_TOLERANCE = 1e-6  # a sum further than this from 1 is re-normalised (and recorded); GX allows 1e-6
LOCAL_WEIGHTS = {"comprehensiveness": 0.3, "insight": 0.3, "instruction_following": 0.2, "readability": 0.2}
LOCAL_VERSION = "race_local_v1"
WEIGHTS_PROMPT, CRITERIA_PROMPT = "race_weights_v1", "race_criteria_v1"
SAMPLE_TEMPERATURE = 1.0  # the weight samples' (N > 1): the providers' default, as the authors sampled


@dataclass(frozen=True)
class WeightSample:
    """One answer to the weights question: normalised and raw weights, or unscored with the reason."""

    sample: int  # 0-based: its seed
    weights: dict[str, float] | None
    raw_weights: dict[str, float] | None = None
    renormalised: bool = False
    unscored_reason: str | None = None

    def stored(self, dimension: str) -> dict:
        """This sample as a row of `dimension` keeps it (race_rubrics.weight_samples)."""
        if self.weights is None or self.raw_weights is None:
            return {"sample": self.sample, "unscored": self.unscored_reason}
        return {"sample": self.sample, "weight": self.weights[dimension], "raw_weight": self.raw_weights[dimension],
                "renormalised": self.renormalised}


@dataclass(frozen=True)
class Rubric:
    """One query's rubric: per dimension (weight, raw weight, criteria); renormalised says weights were scaled;
    weight_samples the samples the weights are the mean of (empty: not sampled, the local judge)."""

    weights: dict[str, float]
    raw_weights: dict[str, float]
    renormalised: bool
    criteria: dict[str, list[RaceCriterion]]
    weight_samples: tuple[WeightSample, ...] = ()


# --------------------------------------------------------------------------------------------- parsing

def _weight(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ParseError(f"{what} must be a number >= 0, got {value!r}")
    return float(value)


def _normalised(raw: Sequence[float], what: str) -> tuple[list[float], bool]:
    total = sum(raw)
    if total <= 0:
        raise ParseError(f"{what} sum to {total}: nothing to weigh by")
    if abs(total - 1.0) <= WEIGHT_TOLERANCE:
        return list(raw), False
    return [w / total for w in raw], True


def parse_weights(text: str) -> tuple[dict[str, float], dict[str, float], bool]:
    """(weights summing to 1, the judge's weights, re-normalised?) from the weights call's answer."""
    obj = parse_json_object(text)
    missing = [d for d in DIMENSIONS if d not in obj]
    if missing:
        raise ParseError(f"missing weight(s) for {', '.join(missing)}")
    raw = {d: _weight(obj[d], f'"{d}"') for d in DIMENSIONS}
    weights, renormalised = _normalised(list(raw.values()), "the dimension weights")
    return dict(zip(DIMENSIONS, weights, strict=True)), raw, renormalised


def mean_weights(samples: Sequence[WeightSample]) -> tuple[dict[str, float], dict[str, float], bool]:
    """(weights, raw weights, re-normalised?) of a rubric from its weight samples: per dimension the mean of
    the normalised weights of the samples that parsed (and of the judge's raw values), and whether any of
    them was re-normalised. The unscored samples are left out; at least one must have parsed."""
    used = [(s.weights, s.raw_weights, s.renormalised) for s in samples
            if s.weights is not None and s.raw_weights is not None]
    if not used:
        raise ValueError("no weight sample parsed: nothing to average")
    weights = {d: math.fsum(w[d] for w, _, _ in used) / len(used) for d in DIMENSIONS}
    raw = {d: math.fsum(r[d] for _, r, _ in used) / len(used) for d in DIMENSIONS}
    return weights, raw, any(renormalised for _, _, renormalised in used)


def parse_criteria(text: str) -> list[RaceCriterion]:
    """3-8 criteria with weights summing to 1 (re-normalised when they do not) from a criteria answer."""
    items = parse_json_array(text)
    if not MIN_CRITERIA <= len(items) <= MAX_CRITERIA:
        raise ParseError(f"expected {MIN_CRITERIA} to {MAX_CRITERIA} criteria, got {len(items)}")
    parsed = []
    for i, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise ParseError(f"criterion {i} is not an object")
        name, explanation = item.get("criterion"), item.get("explanation")
        if not isinstance(name, str) or not name.strip() or not isinstance(explanation, str) or not explanation.strip():
            raise ParseError(f'criterion {i} needs a non-empty "criterion" and "explanation"')
        parsed.append((" ".join(name.split()), " ".join(explanation.split()), _weight(item.get("weight"),
                                                                                     f"criterion {i}'s weight")))
    weights, _ = _normalised([w for _, _, w in parsed], "the criteria weights")
    return [RaceCriterion(n, e, w, raw) for (n, e, raw), w in zip(parsed, weights, strict=True)]


# ----------------------------------------------------------------------------------------------- judges

# The weights: four numbers and a sentence. The criteria: 3-8 of a short name, a sentence and a weight.
WEIGHTS_ANSWER: dict[str, Any] = {"max_tokens": answer_shapes.EXPLAINED_BUDGET, "schema": answer_shapes.object_schema(
    {**{d: {"type": "number", "minimum": 0, "maximum": 1} for d in DIMENSIONS}, "reason": answer_shapes.TEXT})}
CRITERIA_ANSWER: dict[str, Any] = {"max_tokens": answer_shapes.per_item_budget(MAX_CRITERIA, 96), "schema": answer_shapes.array_of(
    answer_shapes.object_schema({"criterion": answer_shapes.TEXT, "explanation": answer_shapes.TEXT,
                                 "weight": {"type": "number", "minimum": 0, "maximum": 1}}))
    | {"minItems": MIN_CRITERIA, "maxItems": MAX_CRITERIA}}


def sample_params(sample: int, samples: int) -> dict:
    """The request parameters of weight sample `sample` (0-based) of `samples`, part of its cache key: none
    for a single sample (the client's deterministic defaults, temperature 0 and seed 0: the call made before
    sampling), else temperature 1 with seed = the sample's index, one distinct cached request per sample."""
    if samples < 1 or not 0 <= sample < samples:
        raise ValueError(f"weight sample {sample} of {samples}: need 0 <= sample < samples, samples >= 1")
    return {} if samples == 1 else {"temperature": SAMPLE_TEMPERATURE, "seed": sample}


def weights_version(samples: int) -> str:
    """The weights step's version: the prompt's for one deterministic call, `<prompt>.x<N>` for N samples."""
    if samples < 1:
        raise ValueError(f"DEEPSCHOLAR_RACE_WEIGHT_SAMPLES must be an integer >= 1, got {samples!r}")
    return WEIGHTS_PROMPT if samples == 1 else f"{WEIGHTS_PROMPT}.x{samples}"


def _weight_samples(client, weights_prompt, query: dict, samples: int) -> tuple[list[WeightSample], int]:
    messages = [{"role": "user", "content": weights_prompt.render(title=query["title"], abstract=query["abstract"])}]
    drawn, calls = [], 0
    for k in range(samples):
        judged = client.ask(messages, parse_weights, purpose="release.race_weights", **WEIGHTS_ANSWER,
                            **sample_params(k, samples))
        calls += judged.calls
        if judged.value is None:
            log.warning("race weight sample %d of %s unscored: %s", k, query["arxiv_id"], judged.unscored_reason)
            drawn.append(WeightSample(k, None, unscored_reason=judged.unscored_reason))
        else:
            weights, raw, renormalised = judged.value
            drawn.append(WeightSample(k, weights, raw, renormalised))
    return drawn, calls


def _llm_rubric(client, prompts, query: dict, samples: int = 1) -> Judged[Rubric]:
    weights_prompt, criteria_prompt = prompts
    drawn, calls = _weight_samples(client, weights_prompt, query, samples)
    if all(s.weights is None for s in drawn):
        reason = drawn[0].unscored_reason if samples == 1 else (
            f"none of {samples} samples answered; the first: {drawn[0].unscored_reason}")
        return Judged(None, f"dimension weights: {reason}", calls)
    weights, raw, renormalised = mean_weights(drawn)
    criteria = {}
    for dim, description in DIMENSIONS.items():
        answer = client.ask([{"role": "user", "content": criteria_prompt.render(
            title=query["title"], abstract=query["abstract"], dimension=dim, dimension_description=description)}],
            parse_criteria, purpose="release.race_criteria", **CRITERIA_ANSWER)
        calls += answer.calls
        if answer.value is None:
            return Judged(None, f"{dim} criteria: {answer.unscored_reason}", calls)
        criteria[dim] = answer.value
    return Judged(Rubric(weights, raw, renormalised, criteria, tuple(drawn)), None, calls)


def local_rubric(title: str, important_titles: Sequence[str], vital_nuggets: Sequence[str]) -> Rubric:
    """The local judge's rubric (module docstring): deterministic, from the exemplar's own labels."""
    works = [t for t in dict.fromkeys(" ".join(t.split()) for t in important_titles if t and t.strip())]
    covers = [(f"covers {w[:120]}", f"discusses {w} or the line of work it stands for") for w in works]
    for nugget in vital_nuggets:
        if len(covers) >= MIN_CRITERIA:
            break
        covers.append((f"says: {nugget[:120]}", f"the section conveys that {nugget}"))
    while len(covers) < MIN_CRITERIA:
        covers.append(("covers the main line of prior work", f"names the prior work {title} builds on"))
    fixed = {
        "insight": [("positions the paper", f"says how {title} differs from or extends the works it cites"),
                    ("compares prior works", "contrasts approaches rather than listing them"),
                    ("explains why it matters", "says why each line of prior work matters for this paper")],
        "instruction_following": [("prior work only", "discusses prior work, not the paper's own results"),
                                  ("cites what it discusses", "every work it discusses carries a citation"),
                                  ("for this paper", f"the prior work is the related work of {title}")],
        "readability": [("organised by theme", "paragraphs group related works under a clear thread"),
                        ("flows", "sentences connect; no list of disconnected summaries"),
                        ("precise", "clear, specific sentences without filler")],
    }
    rows = {"comprehensiveness": covers[:MAX_CRITERIA], **fixed}
    criteria = {d: [RaceCriterion(n, e, 1 / len(rows[d]), 1 / len(rows[d])) for n, e in rows[d]] for d in DIMENSIONS}
    return Rubric(dict(LOCAL_WEIGHTS), dict(LOCAL_WEIGHTS), False, criteria)


def _is_local(ctx) -> bool:
    return ctx.spec.judge.strip() == "local"


def _samples(ctx) -> int:
    return ctx.settings.race_weight_samples


def _version(ctx) -> str:
    """What the rows' prompt_version says: the local heuristic's, or the weights' (with N) and criteria's."""
    return LOCAL_VERSION if _is_local(ctx) else f"{weights_version(_samples(ctx))}+{CRITERIA_PROMPT}"


def _judge_config(ctx) -> str:
    if _is_local(ctx):
        from deepscholar.llm.local_judge import MODEL_ID

        return f"local:{MODEL_ID}:{LOCAL_VERSION}"  # one fixed weight set: the sample count does not apply
    return f"llm:{ctx.spec.judge.strip()}:{_version(ctx)}"


def _prompt_versions(ctx) -> dict:
    if _is_local(ctx):
        return {"local": LOCAL_VERSION}
    return {"weights": weights_version(_samples(ctx)), "criteria": CRITERIA_PROMPT}


# ------------------------------------------------------------------------------------------------ build

def build_race_rubrics(ctx) -> dict:
    """A rubric for every query of the release without a complete one from this judge; idempotent.

    A query's rows from another judge config (another judge, another weight sample count, or made before
    sampling under N > 1) are replaced by this build's, all four at once, and counted (`replaced`); when
    this judge cannot make the query's rubric they stay, counted (`stale`) and logged, never relabelled."""
    judge_config = _judge_config(ctx)
    samples = 1 if _is_local(ctx) else _samples(ctx)
    weights_version(samples)  # a bad sample count fails here, before any call
    counts = {"queries": 0, "built": 0, "kept": 0, "renormalised": 0, "unscored": 0, "calls": 0,
              "weight_samples": 0 if _is_local(ctx) else samples, "weight_samples_unscored": 0, "replaced": 0,
              "stale": 0}
    queries = _rubric_states(ctx, judge_config)
    counts["queries"] = len(queries)
    todo = [q for q in queries if q["n_done"] < len(DIMENSIONS)]
    counts["kept"] = len(queries) - len(todo)
    if not todo:
        return counts
    if _is_local(ctx):
        rubrics = _local_rubrics(ctx, todo)
    else:
        from deepscholar.llm.client import LLMClient
        from deepscholar.prompts import load_prompt_file

        client = LLMClient(ctx.engine, ctx.spec.judge.strip(), api_base=ctx.settings.judge_api_base,
                           concurrency=ctx.settings.release_judge_concurrency)
        prompts = (load_prompt_file(__package__, WEIGHTS_PROMPT), load_prompt_file(__package__, CRITERIA_PROMPT))
        rubrics = client.map(lambda q: _llm_rubric(client, prompts, q, samples), todo)
    version = _version(ctx)
    for query, judged in zip(todo, rubrics, strict=True):
        counts["calls"] += judged.calls
        if judged.value is None:
            counts["unscored"] += 1
            log.warning("race rubric of %s unscored: %s", query["arxiv_id"], judged.unscored_reason)
            if query["n_other"]:
                counts["stale"] += 1
                log.warning("race rubric of %s: the rows of another judge config stay, not %s", query["arxiv_id"],
                            judge_config)
            continue
        rubric = judged.value
        counts["built"] += 1
        counts["replaced"] += int(query["n_other"] > 0)
        counts["renormalised"] += int(rubric.renormalised)
        counts["weight_samples_unscored"] += sum(1 for s in rubric.weight_samples if s.weights is None)
        with ctx.engine.begin() as conn:
            db.upsert(conn, "race_rubrics", _rubric_rows(ctx.release_id, query["arxiv_id"], rubric, judge_config,
                                                         version), key=["release_id", "arxiv_id", "dimension"])
    log.info("race rubrics of %s: %s", ctx.release_id, counts)
    return counts


def _rubric_states(ctx, judge_config: str) -> list[dict]:
    """The release's queries with how many rubric rows this judge config (`n_done`) and others (`n_other`)
    already stored for each."""
    with ctx.engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(f"""
            SELECT q.arxiv_id, q.title, q.abstract,
                   (SELECT count(*) FROM {SCHEMA}.race_rubrics r WHERE r.release_id = q.release_id
                      AND r.arxiv_id = q.arxiv_id AND r.judge_config = :j) AS n_done,
                   (SELECT count(*) FROM {SCHEMA}.race_rubrics r WHERE r.release_id = q.release_id
                      AND r.arxiv_id = q.arxiv_id AND r.judge_config <> :j) AS n_other
            FROM {SCHEMA}.release_queries q WHERE q.release_id = :r ORDER BY q.arxiv_id"""),
            {"r": ctx.release_id, "j": judge_config}).mappings()]


def _rubric_rows(release_id: str, arxiv_id: str, rubric: Rubric, judge_config: str, version: str) -> list[dict]:
    """A query's four race_rubrics rows, one per dimension."""
    return [{"release_id": release_id, "arxiv_id": arxiv_id, "dimension": d,
             "weight": rubric.weights[d], "raw_weight": rubric.raw_weights[d], "renormalised": rubric.renormalised,
             "criteria": [{"criterion": c.criterion, "explanation": c.explanation, "weight": c.weight,
                           "raw_weight": c.raw_weight} for c in rubric.criteria[d]],
             "weight_samples": [s.stored(d) for s in rubric.weight_samples],  # []: not sampled (local)
             "judge_config": judge_config, "prompt_version": version} for d in DIMENSIONS]


def _local_rubrics(ctx, queries: Sequence[dict]) -> list[Judged[Rubric]]:
    with ctx.engine.connect() as conn:
        refs = conn.execute(sa.text(f"""
            SELECT arxiv_id, coalesce(resolved_title, bib_title) AS title FROM {SCHEMA}.exemplar_references
            WHERE release_id = :r AND is_important ORDER BY arxiv_id, cite_key"""), {"r": ctx.release_id}).all()
        nuggets = conn.execute(sa.text(f"""
            SELECT arxiv_id, text FROM {SCHEMA}.nuggets WHERE release_id = :r AND importance = 'vital'
            ORDER BY arxiv_id, nugget_idx"""), {"r": ctx.release_id}).all()
    titles: dict[str, list[str]] = {}
    for arxiv_id, title in refs:
        titles.setdefault(arxiv_id, []).append(title or "")
    vital: dict[str, list[str]] = {}
    for arxiv_id, text in nuggets:
        vital.setdefault(arxiv_id, []).append(text)
    return [Judged(local_rubric(q["title"], titles.get(q["arxiv_id"], []), vital.get(q["arxiv_id"], [])), None, 0)
            for q in queries]


# ------------------------------------------------------------------------------------------------- gate

_FRAMES = {
    # One row per query: how many dimensions it has, their weights' sum, its fewest and most criteria, and
    # the largest distance of a dimension's criteria weights from 1.
    "race_queries": f"""
        SELECT q.arxiv_id, count(r.dimension) AS n_dimensions, coalesce(sum(r.weight), 0) AS weight_sum,
               coalesce(min(jsonb_array_length(r.criteria)), 0) AS min_criteria,
               coalesce(max(jsonb_array_length(r.criteria)), 0) AS max_criteria,
               coalesce(max(abs(1 - (SELECT sum((c ->> 'weight')::double precision)
                                     FROM jsonb_array_elements(r.criteria) c))), 1) AS criteria_weight_gap
        FROM {SCHEMA}.release_queries q
        LEFT JOIN {SCHEMA}.race_rubrics r ON r.release_id = q.release_id AND r.arxiv_id = q.arxiv_id
        WHERE q.release_id = :r GROUP BY q.arxiv_id ORDER BY q.arxiv_id""",
}


def _checks(gxe) -> list[Check]:
    between = gxe.ExpectColumnValuesToBeBetween
    key = ["arxiv_id"]
    return [
        Check("race_rubric_for_every_query", "race_queries", between(column="n_dimensions", min_value=len(DIMENSIONS),
                                                                     max_value=len(DIMENSIONS)), key),
        Check("race_weights_sum_to_one", "race_queries",
              between(column="weight_sum", min_value=1 - WEIGHT_TOLERANCE, max_value=1 + WEIGHT_TOLERANCE), key),
        Check("race_criteria_per_dimension", "race_queries",
              between(column="min_criteria", min_value=MIN_CRITERIA), key),
        Check("race_criteria_at_most", "race_queries", between(column="max_criteria", max_value=MAX_CRITERIA), key),
        Check("race_criteria_weights_sum_to_one", "race_queries",
              between(column="criteria_weight_gap", max_value=WEIGHT_TOLERANCE), key),
    ]


ARTEFACTS = TrackArtefacts(track="race", build=build_race_rubrics, judge_config=_judge_config,
                           prompt_versions=_prompt_versions, frames=_FRAMES, checks=_checks)

