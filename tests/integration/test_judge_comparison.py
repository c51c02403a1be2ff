"""Judge vs judge on the demo month: the local judge against an LLM judge answered by the OpenAI-compatible
stub over real HTTP, on relevance_rate (cheap: one question per (query, source)).

The stub grades 2 every source the local board's weakest system cites and 0 every other, so that system
overtakes the local board's strongest one: a swap the comparison must report. Re-judging under the LLM
config must leave every row of the local config's boards as it was; agreement with human labels is checked
on the same month."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from support.demo_month import served_demo_month
from support.human_labels import store_human_labels
from support.openai_stub import OpenAIStub, first_user_text

from deepscholar import cli
from deepscholar.evaluation.boards.board_versions import BOARD_TABLES
from deepscholar.evaluation.boards.leaderboard import load_leaderboard
from deepscholar.evaluation.judge_spec import JudgeSpec
from deepscholar.evaluation.judge_validation.annotation_units import judged_units
from deepscholar.evaluation.judge_validation.judge_comparison import compare_judges, load_comparison
from deepscholar.evaluation.judge_validation.judge_vs_humans import agreement_report
from deepscholar.evaluation.judge_validation.rater_agreement import cohen_kappa, percent_agreement
from deepscholar.evaluation.pipeline import evaluate_release

pytestmark = pytest.mark.slow  # builds and judges the demo month

METRIC = "relevance_rate"
LOCAL = JudgeSpec.parse("local").config_id
LLM_MODEL = "openai/stub-judge"
LLM = JudgeSpec.parse(LLM_MODEL).config_id


def _board_rows(engine, judge_config: str) -> dict[str, list[dict]]:
    """Every row of every board table under one judge config, every version, in a stable order."""
    out = {}
    with engine.connect() as conn:
        for table in BOARD_TABLES:
            rows = [dict(r) for r in conn.execute(sa.text(
                f"SELECT * FROM deepscholar.{table} WHERE judge_config = :j"), {"j": judge_config}).mappings()]
            out[table] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
    return out


def _means(engine, month: str, judge_config: str) -> dict[str, float]:
    return {r["system_id"]: r["metrics"][METRIC]["mean"] for r in load_leaderboard(engine, month, judge_config)
            if r.get("rank") is not None and r["metrics"][METRIC]["mean"] is not None}


@pytest.fixture(scope="module")
def judged(demo_template):
    """The demo month judged on relevance_rate by the local judge, then by the stubbed LLM judge."""
    with served_demo_month(demo_template, "deepscholar_judgecmp_") as month, pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", "test")
        engine, release = month["engine"], month["month"]
        evaluate_release(engine, release, judge="local", metrics=[METRIC])
        local_before = _board_rows(engine, LOCAL)
        local_means = _means(engine, release, LOCAL)
        weak = min(local_means, key=lambda s: (local_means[s], s))
        strong = max(local_means, key=lambda s: (local_means[s], s))
        assert local_means[weak] < local_means[strong]
        units = list(judged_units(engine, release, METRIC, LOCAL))
        favoured = {u.unit.content["source_title"] for u in units if u.system_id == weak}

        def grade(body: dict) -> str:
            prompt = first_user_text(body)
            g = 2 if any(title in prompt for title in favoured) else 0
            return json.dumps({"grade": g, "explanation": "scripted"})

        with OpenAIStub(model_suffix="") as stub:
            stub.default = grade
            evaluate_release(engine, release, judge=LLM_MODEL, metrics=[METRIC], api_base=stub.url, concurrency=8)
            assert stub.requests > 0
        yield {"engine": engine, "db_url": month["db_url"], "month": release, "local_before": local_before,
               "weak": weak, "strong": strong, "units": units}


def test_rejudging_under_a_second_judge_leaves_the_first_judges_boards_as_they_were(judged):
    engine = judged["engine"]
    assert judged["local_before"]["leaderboard_systems"] and judged["local_before"]["leaderboard_metrics"]
    assert _board_rows(engine, LOCAL) == judged["local_before"]
    assert _board_rows(engine, LLM)["leaderboard_systems"]  # the new judge has a board of its own


def test_judges_compare_reports_item_agreement_and_the_known_swap(judged, monkeypatch, capsys):
    engine, month, weak, strong = judged["engine"], judged["month"], judged["weak"], judged["strong"]
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", judged["db_url"])  # the CLI reads this month's warehouse
    assert cli.main(["judges", "compare", "--release", month, "--a", "local", "--b", LLM, "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["judge_a"], result["judge_b"]) == (LOCAL, LLM)

    # Item agreement: a recomputation from the two configs' stored labels, matched by item_id.
    la = {u.item_id: u.judge_label for u in judged_units(engine, month, METRIC, LOCAL) if u.judge_label}
    lb = {u.item_id: u.judge_label for u in judged_units(engine, month, METRIC, LLM) if u.judge_label}
    shared = sorted(la.keys() & lb.keys())
    assert shared and len(shared) == len(la)
    xa, xb = [la[i] for i in shared], [lb[i] for i in shared]
    row = next(m for m in result["metrics"] if m["metric"] == METRIC)
    assert row["n_items"] == len(shared)
    assert row["percent_agreement"] == pytest.approx(percent_agreement(xa, xb))
    assert row["percent_agreement"] == pytest.approx(sum(x == y for x, y in zip(xa, xb, strict=True)) / len(xa))
    assert row["cohen_kappa"] == pytest.approx(cohen_kappa(xa, xb, ["2", "1", "0"]))
    assert sum(sum(r.values()) for r in row["confusion"].values()) == len(shared)
    assert row["confusion"]["2"]["0"] == sum(x == "2" and y == "0" for x, y in zip(xa, xb, strict=True))
    assert row["ci"][0] <= row["percent_agreement"] <= row["ci"][1]

    # Deltas and swaps from the stored boards: the weak system overtakes the strong one.
    ma, mb = _means(engine, month, LOCAL), _means(engine, month, LLM)
    assert mb[weak] == pytest.approx(1.0) and mb[weak] > mb[strong]
    assert row["deltas"][weak] == pytest.approx(mb[weak] - ma[weak])
    swapped = {(s["higher_on_a"], s["higher_on_b"]) for s in row["swaps"]}
    expected = {(s, t) for s in ma for t in ma if ma[s] > ma[t] and mb[s] < mb[t]}
    assert swapped == expected and (strong, weak) in swapped
    # The core boards hold one metric of seven: no geometric mean, so no headline ranking to compare.
    assert result["board"]["n_systems"] == 0 and result["board"]["kendall_tau"] is None

    # Stored once, in canonical order; read back in either order, the same comparison.
    with engine.connect() as conn:
        pairs = conn.execute(sa.text("SELECT judge_a, judge_b FROM judge_comparisons WHERE release_id = :r"),
                             {"r": month}).all()
    assert pairs == [tuple(sorted((LOCAL, LLM)))]
    stored = load_comparison(engine, month, LOCAL, LLM)
    stored_row = next(m for m in stored["metrics"] if m["metric"] == METRIC)
    assert stored_row["percent_agreement"] == pytest.approx(row["percent_agreement"])
    assert {(s["higher_on_a"], s["higher_on_b"]) for s in stored_row["swaps"]} == swapped
    reverse = compare_judges(engine, month, LLM, LOCAL)
    rev_row = next(m for m in reverse["metrics"] if m["metric"] == METRIC)
    assert rev_row["deltas"][weak] == pytest.approx(-row["deltas"][weak])
    assert {(s["higher_on_b"], s["higher_on_a"]) for s in rev_row["swaps"]} == swapped
    with engine.connect() as conn:  # idempotent: computing again replaced, never added
        assert conn.execute(sa.text("SELECT count(*) FROM judge_comparisons")).scalar() == 1


def test_judges_compare_refuses_what_cannot_be_compared(judged, monkeypatch, capsys):
    month = judged["month"]
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", judged["db_url"])
    assert cli.main(["judges", "compare", "--release", month, "--a", "local", "--b", "local"]) == 2
    assert "two different judge configs" in capsys.readouterr().err
    assert cli.main(["judges", "compare", "--release", month, "--a", "local", "--b", "openai/never-ran"]) == 2
    assert "has no judgments and no board" in capsys.readouterr().err


def test_agreement_with_human_labels_on_the_demo_month(judged, monkeypatch, capsys):
    engine, month = judged["engine"], judged["month"]
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", judged["db_url"])
    units = list(judged_units(engine, month, METRIC, LLM))[:12]
    judge = {u.item_id: u.judge_label for u in units}
    ids = sorted(judge)
    # Annotator h1 agrees with the LLM judge on all 12 items; h2 on the first 8 and says "1" on the rest
    # (the LLM judge only says 0 or 2). Majority: items 9-12 are 1-1 ties, left out; judge = majority on 8.
    h1 = {i: judge[i] for i in ids}
    h2 = {i: (judge[i] if n < 8 else "1") for n, i in enumerate(ids)}
    store_human_labels(engine, units, {"h1": h1, "h2": h2})
    assert cli.main(["agreement", "--release", month, "--judge", LLM_MODEL, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["metric"] for r in report] == [METRIC]
    r = report[0]
    assert (r["n_items"], r["n_annotators"], r["n_ties"], r["percent_agreement"]) == (8, 2, 4, 1.0)
    assert r["ci"] == [1.0, 1.0]
    assert sum(sum(row.values()) for row in r["confusion"].values()) == 8
    inter = r["inter_annotator"]
    assert inter["percent_agreement"] == pytest.approx(8 / 12) and inter["n_items"] == 12
    assert inter["krippendorff_alpha"] is not None and inter["krippendorff_alpha"] < 1
    for key in ("metric", "n_items", "n_annotators", "percent_agreement", "cohen_kappa", "ci", "confusion",
                "inter_annotator", "paper_agreement", "kappa_ci"):
        assert key in r
    # Against the local judge the same labels agree less (or equally), never more than they could.
    local = agreement_report(engine, month, METRIC, LOCAL)[0]
    assert local["judge_config"] == LOCAL and local["n_items"] == 8
    # Clear errors: a metric nobody labelled, an unknown metric, a judge that never judged the month.
    assert cli.main(["agreement", "--release", month, "--metric", "nope"]) == 2
    assert "unknown metric" in capsys.readouterr().err
    assert cli.main(["agreement", "--release", month, "--judge", "openai/never-ran"]) == 2
    assert "has no judgments" in capsys.readouterr().err
