"""RACE's release-time rubric: per query, the weights of four dimensions and each dimension's criteria.

After DeepResearch Bench's RACE, adapted to our task (docs/METRICS.md "RACE track"): the release judge
reads the query paper's title and abstract and the task, weighs four dimensions (one call), and writes 3-8
criteria specific to the paper for each dimension with weights (one call per dimension): 1 + 4 calls per
query, once per release, stored in race_rubrics with the judge config and prompt versions that made them.
Weights that do not sum to 1 are re-normalised and the row says so (`renormalised`, `raw_weight`);
criteria weights likewise within their dimension.

The offline local judge cannot read the task, so it answers with a documented heuristic, the same for
every run: weights 0.3 / 0.3 / 0.2 / 0.2 (comprehensiveness and insight first, as the task is about prior
work); comprehensiveness criteria "covers <work>" for the exemplar's important references (3-8, in
bibliography order, vital nuggets filling in when fewer than 3 have titles), and three fixed criteria per
other dimension; equal weights within a dimension.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from deepscholar import db
from deepscholar.db import SCHEMA
from deepscholar.gx import Check
from deepscholar.llm.client import Judged, ParseError, parse_json_array, parse_json_object
from deepscholar.release.track_artefacts import TrackArtefacts

__all__ = ["DIMENSIONS", "ARTEFACTS", "Criterion", "Rubric", "parse_weights", "parse_criteria", "build_race_rubrics",
           "local_rubric", "WEIGHT_TOLERANCE"]

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


@dataclass(frozen=True)
class Criterion:
    criterion: str
    explanation: str
    weight: float
    raw_weight: float


@dataclass(frozen=True)
class Rubric:
    """One query's rubric: per dimension (weight, raw weight, criteria); renormalised says weights were scaled."""

    weights: dict[str, float]
    raw_weights: dict[str, float]
    renormalised: bool
    criteria: dict[str, list[Criterion]]


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


def parse_criteria(text: str) -> list[Criterion]:
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
    return [Criterion(n, e, w, raw) for (n, e, raw), w in zip(parsed, weights, strict=True)]


# ----------------------------------------------------------------------------------------------- judges

def _llm_rubric(client, prompts, query: dict) -> Judged[Rubric]:
    weights_prompt, criteria_prompt = prompts
    calls = 0
    judged = client.ask([{"role": "user", "content": weights_prompt.render(
        title=query["title"], abstract=query["abstract"])}], parse_weights, purpose="release.race_weights")
    calls += judged.calls
    if judged.value is None:
        return Judged(None, f"dimension weights: {judged.unscored_reason}", calls)
    weights, raw, renormalised = judged.value
    criteria = {}
    for dim, description in DIMENSIONS.items():
        answer = client.ask([{"role": "user", "content": criteria_prompt.render(
            title=query["title"], abstract=query["abstract"], dimension=dim, dimension_description=description)}],
            parse_criteria, purpose="release.race_criteria")
        calls += answer.calls
        if answer.value is None:
            return Judged(None, f"{dim} criteria: {answer.unscored_reason}", calls)
        criteria[dim] = answer.value
    return Judged(Rubric(weights, raw, renormalised, criteria), None, calls)


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
    criteria = {d: [Criterion(n, e, 1 / len(rows[d]), 1 / len(rows[d])) for n, e in rows[d]] for d in DIMENSIONS}
    return Rubric(dict(LOCAL_WEIGHTS), dict(LOCAL_WEIGHTS), False, criteria)


def _is_local(ctx) -> bool:
    return ctx.spec.judge.strip() == "local"


def _judge_config(ctx) -> str:
    if _is_local(ctx):
        from deepscholar.llm.local_judge import MODEL_ID

        return f"local:{MODEL_ID}:{LOCAL_VERSION}"
    return f"llm:{ctx.spec.judge.strip()}:{WEIGHTS_PROMPT}+{CRITERIA_PROMPT}"


def _prompt_versions(ctx) -> dict:
    return {"local": LOCAL_VERSION} if _is_local(ctx) else {"weights": WEIGHTS_PROMPT, "criteria": CRITERIA_PROMPT}


# ------------------------------------------------------------------------------------------------ build

def build_race_rubrics(ctx) -> dict:
    """A rubric for every query of the release without a complete one from this judge; idempotent."""
    judge_config = _judge_config(ctx)
    counts = {"queries": 0, "built": 0, "kept": 0, "renormalised": 0, "unscored": 0, "calls": 0}
    with ctx.engine.connect() as conn:
        queries = [dict(r) for r in conn.execute(sa.text(f"""
            SELECT q.arxiv_id, q.title, q.abstract,
                   (SELECT count(*) FROM {SCHEMA}.race_rubrics r WHERE r.release_id = q.release_id
                      AND r.arxiv_id = q.arxiv_id AND r.judge_config = :j) AS n_done
            FROM {SCHEMA}.release_queries q WHERE q.release_id = :r ORDER BY q.arxiv_id"""),
            {"r": ctx.release_id, "j": judge_config}).mappings()]
    counts["queries"] = len(queries)
    todo = [q for q in queries if q["n_done"] < len(DIMENSIONS)]
    counts["kept"] = len(queries) - len(todo)
    if not todo:
        return counts
    if _is_local(ctx):
        rubrics = _local_rubrics(ctx, todo)
    else:
        from deepscholar.llm.client import LLMClient
        from deepscholar.release.judging import load_prompt

        client = LLMClient(ctx.engine, ctx.spec.judge.strip(), api_base=ctx.settings.judge_api_base,
                           concurrency=ctx.settings.release_judge_concurrency)
        prompts = (load_prompt(WEIGHTS_PROMPT), load_prompt(CRITERIA_PROMPT))
        rubrics = client.map(lambda q: _llm_rubric(client, prompts, q), todo)
    version = CRITERIA_PROMPT if not _is_local(ctx) else LOCAL_VERSION
    for query, judged in zip(todo, rubrics, strict=True):
        counts["calls"] += judged.calls
        if judged.value is None:
            counts["unscored"] += 1
            log.warning("race rubric of %s unscored: %s", query["arxiv_id"], judged.unscored_reason)
            continue
        rubric = judged.value
        counts["built"] += 1
        counts["renormalised"] += int(rubric.renormalised)
        rows = [{"release_id": ctx.release_id, "arxiv_id": query["arxiv_id"], "dimension": d,
                 "weight": rubric.weights[d], "raw_weight": rubric.raw_weights[d], "renormalised": rubric.renormalised,
                 "criteria": [{"criterion": c.criterion, "explanation": c.explanation, "weight": c.weight,
                               "raw_weight": c.raw_weight} for c in rubric.criteria[d]],
                 "judge_config": judge_config, "prompt_version": version} for d in DIMENSIONS]
        with ctx.engine.begin() as conn:
            db.upsert(conn, "race_rubrics", rows, key=["release_id", "arxiv_id", "dimension"])
    log.info("race rubrics of %s: %s", ctx.release_id, counts)
    return counts


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

