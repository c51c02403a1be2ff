"""Human labels for judge validation on the demo month judged by the local judge: every judged metric's
annotation units, `deepscholar annotate export` (blind, stratified, reproducible, recorded) and
`deepscholar annotate import` (all or nothing, one label per annotator and item, history kept)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.demo_month import served_demo_month

from deepscholar import cli
from deepscholar.evaluation.judge_spec import JudgeSpec
from deepscholar.evaluation.judge_validation.annotation_units import judged_units
from deepscholar.evaluation.judging.runner import judge_metric
from deepscholar.evaluation.metrics import get_metric, registry

pytestmark = pytest.mark.slow  # builds and judges the demo month

LOCAL = JudgeSpec.parse("local").config_id
CORE_JUDGED = [m.name for m in registry.metrics(registry.CORE) if hasattr(m, "annotation_units")]
JUDGED = [*CORE_JUDGED, "citation_accuracy"]  # a track's batch metric too
METRIC = "citation_precision"  # what the export/import tests sample
ANNOTATION_TABLES = ("human_label_history", "human_labels", "annotation_sample_items", "annotation_samples",
                     "annotation_items")


@pytest.fixture(scope="module")
def demo(demo_template):
    """The demo month judged locally on the judged core metrics (and citation_accuracy) only."""
    with served_demo_month(demo_template, "deepscholar_annot_") as month:
        for name in JUDGED:
            judge_metric(month["engine"], month["month"], name)
        yield month


@pytest.fixture
def month(demo, monkeypatch):
    """The judged month with no annotation rows yet, and the CLI pointed at its warehouse."""
    with demo["engine"].begin() as conn:
        conn.execute(sa.text(f"TRUNCATE {', '.join(ANNOTATION_TABLES)} CASCADE"))
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", demo["db_url"])
    monkeypatch.setenv("DEEPSCHOLAR_JUDGE", "local")
    return demo


def _count(engine, table: str) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()


def _counts(engine) -> dict[str, int]:
    return {t: _count(engine, t) for t in ANNOTATION_TABLES}


def _export(month, out: Path, *, n: int = 12, seed: int = 7, metric: str = METRIC, extra=()) -> list[dict]:
    code = cli.main(["annotate", "export", "--release", month["month"], "--metric", metric, "--n", str(n),
                     "--seed", str(seed), "--out", str(out), *extra])
    assert code == 0
    return [json.loads(line) for line in out.with_suffix(".jsonl").read_text().splitlines()]


def _judge_labels(engine) -> dict[str, str]:
    with engine.connect() as conn:
        return dict(conn.execute(sa.text("SELECT item_id, judge_label FROM annotation_sample_items")).all())


def _write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# --- the metrics' units on real judgments -------------------------------------------------------------

@pytest.mark.parametrize("name", JUDGED)
def test_every_judged_metric_gives_units_with_allowed_judge_labels_and_stable_ids(demo, name):
    engine, release = demo["engine"], demo["month"]
    metric = get_metric(name)
    first = list(judged_units(engine, release, name, LOCAL))
    assert first, f"{name}: no units on the judged demo month"
    labels = set(metric.annotation_labels)
    assert all(u.judge_label is None or u.judge_label in labels for u in first)
    assert any(u.judge_label is not None for u in first)
    assert all(u.unit.content and all(isinstance(v, str) and v.strip() for v in u.unit.content.values())
               for u in first)
    ids = [u.item_id for u in first]
    assert len(set(ids)) == len(ids)
    assert [u.item_id for u in judged_units(engine, release, name, LOCAL)] == ids


# --- export --------------------------------------------------------------------------------------------

def test_the_same_seed_draws_the_same_items_in_the_same_order_and_is_recorded_once(month, tmp_path):
    engine = month["engine"]
    a = _export(month, tmp_path / "a.jsonl")
    b = _export(month, tmp_path / "b")
    assert [r["item_id"] for r in a] == [r["item_id"] for r in b] and len(a) == 12
    other = _export(month, tmp_path / "c.csv", seed=8)
    assert [r["item_id"] for r in other] != [r["item_id"] for r in a]
    with engine.connect() as conn:
        samples = conn.execute(sa.text(
            "SELECT seed, n_requested, n_items, judge_config, cardinality(out_files) FROM annotation_samples "
            "ORDER BY sample_id")).all()
        positions = conn.execute(sa.text(
            "SELECT item_id FROM annotation_sample_items WHERE sample_id = (SELECT min(sample_id) FROM "
            "annotation_samples) ORDER BY position")).scalars().all()
    # The second export of seed 7 is the same draw: its record is reused, with both files' names.
    assert samples == [(7, 12, 12, LOCAL, 4), (8, 12, 12, LOCAL, 2)]
    assert positions == [r["item_id"] for r in a]


def test_the_sample_covers_every_system_and_every_judge_label(month, tmp_path):
    engine, release = month["engine"], month["month"]
    scored = [u for u in judged_units(engine, release, METRIC, LOCAL) if u.judge_label is not None]
    systems, labels = {u.system_id for u in scored}, {u.judge_label for u in scored}
    strata = {(u.system_id, u.judge_label) for u in scored}
    assert len(systems) >= 3 and len(labels) == 2
    rows = _export(month, tmp_path / "s", n=len(strata) + 2, seed=3)
    system_of = {u.item_id: u.system_id for u in scored}
    label_of = {u.item_id: u.judge_label for u in scored}
    assert {(system_of[r["item_id"]], label_of[r["item_id"]]) for r in rows} == strata
    # The judge labels the sample recorded are the judge's (what an agreement report compares against).
    assert _judge_labels(engine) == {r["item_id"]: label_of[r["item_id"]] for r in rows}


def test_the_files_are_blind_self_contained_and_the_same_in_jsonl_and_csv(month, tmp_path):
    engine, release = month["engine"], month["month"]
    rows = _export(month, tmp_path / "blind", n=10)
    with (tmp_path / "blind.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        columns, csv_rows = reader.fieldnames, list(reader)
    assert columns == list(rows[0])
    assert columns[:6] == ["item_id", "metric", "question", "allowed_labels", "query_title", "query_abstract"]
    assert columns[-1] == "label" and {"sentence", "source"} <= set(columns)
    assert [{k: json.loads(v) if k == "allowed_labels" else v for k, v in r.items()} for r in csv_rows] == rows
    metric = get_metric(METRIC)
    systems = {u.system_id for u in judged_units(engine, release, METRIC, LOCAL)}
    with engine.connect() as conn:
        titles = set(conn.execute(sa.text("SELECT title FROM release_queries WHERE release_id = :r"),
                                  {"r": release}).scalars())
    for row in rows:
        assert row["metric"] == METRIC and row["label"] == ""
        assert row["allowed_labels"] == list(metric.annotation_labels) and row["question"] == metric.annotation_question
        assert row["query_title"] in {" ".join(t.split()) for t in titles} and row["query_abstract"]
        assert not {"judge_label", "system_id", "system", "report_id", "judge_config"} & set(row)
    text = (tmp_path / "blind.jsonl").read_text() + (tmp_path / "blind.csv").read_text()
    assert not any(s in text for s in systems if s != "oracle") and LOCAL not in text
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT item_id, content, allowed_labels FROM annotation_items")).all()
    assert {r.item_id for r in stored} == {r["item_id"] for r in rows}
    by_id = {r["item_id"]: r for r in rows}
    for item_id, content, allowed in stored:
        assert content == {k: by_id[item_id][k] for k in content} and list(allowed) == by_id[item_id]["allowed_labels"]


@pytest.mark.parametrize(("argv", "says"), [
    (["--release", "2019-01", "--metric", METRIC], "no release '2019-01'"),
    (["--release", "{month}", "--metric", "reference_coverage"], "asks no judge"),
    (["--release", "{month}", "--metric", METRIC, "--judge", "openai/never-used"], LOCAL),
    (["--release", "{month}", "--metric", "race_overall"], "nothing is judged yet"),
])
def test_export_refusals_say_why_in_one_line_and_record_nothing(month, tmp_path, capsys, argv, says):
    argv = [a.replace("{month}", month["month"]) for a in argv]
    code = cli.main(["annotate", "export", *argv, "--n", "5", "--seed", "1", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert _count(month["engine"], "annotation_samples") == 0 and not list(tmp_path.iterdir())


def test_a_sample_size_below_one_is_a_usage_error(month, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["annotate", "export", "--release", month["month"], "--metric", METRIC, "--n", "0", "--seed", "1",
                  "--out", str(tmp_path / "x")])
    assert exit_.value.code == 2 and "positive integer" in capsys.readouterr().err


def test_a_stored_judge_config_is_accepted_as_the_judge(month, tmp_path):
    rows = _export(month, tmp_path / "cfg", n=3, extra=["--judge", LOCAL])
    assert len(rows) == 3 and rows == _export(month, tmp_path / "spec", n=3, extra=["--judge", "local"])


# --- import --------------------------------------------------------------------------------------------

def _labelled(rows, label_of, flip=()) -> list[dict]:
    """The exported rows with the judge's label filled in (the other label for the ids in `flip`)."""
    out = []
    for r in rows:
        label = label_of[r["item_id"]]
        if r["item_id"] in flip:
            label = next(x for x in r["allowed_labels"] if x != label)
        out.append({**r, "label": label})
    return out


@pytest.mark.parametrize("case", ["unknown item", "bad label", "duplicate", "no label column", "no annotator",
                                  "not json"])
def test_a_bad_file_is_refused_as_a_whole_naming_the_row(month, tmp_path, capsys, case):
    engine = month["engine"]
    rows = _export(month, tmp_path / "s", n=6)
    good = _labelled(rows, _judge_labels(engine))
    annotator = ["--annotator", "ann"]
    if case == "unknown item":
        good[3]["item_id"], line, says = "cit-doesnotexist", 4, "unknown item_id 'cit-doesnotexist'"
    elif case == "bad label":
        good[2]["label"], line, says = "maybe", 3, "label 'maybe' is not allowed"
    elif case == "duplicate":
        good.append(dict(good[1]))
        line, says = 7, "appears twice (first at line 2)"
    elif case == "no label column":
        for r in good:
            r.pop("label")
        line, says = 1, "the header lacks column(s) 'label'"
    elif case == "no annotator":
        annotator, line, says = [], 1, "no annotator"
    else:
        line, says = 5, "not valid JSON"
    if case == "no label column":  # a CSV without the column
        path = tmp_path / "bad.csv"
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(good[0]))
            writer.writeheader()
            writer.writerows({k: json.dumps(v) if isinstance(v, list) else v for k, v in r.items()} for r in good)
    else:
        path = _write_jsonl(tmp_path / "bad.jsonl", good)
        if case == "not json":
            lines = path.read_text().splitlines()
            lines[4] = lines[4][:-1]
            path.write_text("\n".join(lines) + "\n")
    before = _counts(engine)
    capsys.readouterr()
    assert cli.main(["annotate", "import", str(path), *annotator]) == 2
    err = capsys.readouterr().err
    assert f"line {line}:" in err and says in err and "nothing was imported" in err, err
    assert len(err.strip().splitlines()) == 1
    assert _counts(engine) == before and _count(engine, "human_labels") == 0


def test_labels_are_kept_per_annotator_relabelling_keeps_history_and_reimport_changes_nothing(month, tmp_path,
                                                                                             capsys):
    engine = month["engine"]
    rows = _export(month, tmp_path / "s", n=8)
    judge = _judge_labels(engine)
    ids = [r["item_id"] for r in rows]
    alice = _labelled(rows, judge)
    alice[7]["label"] = ""  # not labelled yet
    first = _write_jsonl(tmp_path / "alice.jsonl", alice)
    capsys.readouterr()
    assert cli.main(["annotate", "import", str(first), "--annotator", "alice"]) == 0
    out = capsys.readouterr().out
    assert "7 labels stored, 0 replaced" in out and "7 unchanged, 1 rows without a label skipped" not in out
    assert "0 unchanged, 1 rows without a label skipped; annotators: alice" in out

    # Bob labels in CSV, disagreeing on two items; his labels sit beside Alice's.
    bob = tmp_path / "bob.csv"
    with bob.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["item_id", "label", "comment"])
        writer.writeheader()
        for r in _labelled(rows, judge, flip=ids[:2]):
            writer.writerow({"item_id": r["item_id"], "label": f" {r['label']} ", "comment": "x"})
    assert cli.main(["annotate", "import", str(bob), "--annotator", "bob"]) == 0
    # Re-importing Alice's file changes nothing at all.
    before = _counts(engine)
    capsys.readouterr()
    assert cli.main(["annotate", "import", str(first), "--annotator", "alice"]) == 0
    out = capsys.readouterr().out
    assert "0 labels stored, 0 replaced" in out and "7 unchanged, 1 rows without a label skipped" in out
    assert _counts(engine) == before

    # Alice relabels item 0 (and labels item 7) in a file naming her per row: her own label is replaced.
    again = _labelled(rows, judge, flip=ids[:1])
    for r in again:
        r["annotator"] = "alice"
    assert cli.main(["annotate", "import", str(_write_jsonl(tmp_path / "alice2.jsonl", again))]) == 0
    with engine.connect() as conn:
        current = {(r.item_id, r.annotator): r.label for r in conn.execute(sa.text(
            "SELECT item_id, annotator, label FROM human_labels"))}
        history = conn.execute(sa.text(
            "SELECT label, replaced_at IS NOT NULL FROM human_label_history WHERE item_id = :i AND annotator = 'alice' "
            "ORDER BY history_id"), {"i": ids[0]}).all()
        n_history = conn.execute(sa.text("SELECT count(*) FROM human_label_history")).scalar_one()
    flipped = next(x for x in rows[0]["allowed_labels"] if x != judge[ids[0]])
    assert current[(ids[0], "alice")] == flipped and current[(ids[1], "alice")] == judge[ids[1]]
    assert current[(ids[0], "bob")] == flipped and current[(ids[1], "bob")] != judge[ids[1]]
    assert current[(ids[7], "alice")] == judge[ids[7]]
    assert len(current) == 16
    assert history == [(judge[ids[0]], True), (flipped, False)]
    assert n_history == 7 + 8 + 2  # alice's first 7, bob's 8, alice's relabel and her new label


def test_a_bad_row_of_the_exported_csv_is_named_by_its_spreadsheet_row(month, tmp_path, capsys):
    engine = month["engine"]
    _export(month, tmp_path / "s", n=6)
    with (tmp_path / "s.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        columns, rows = reader.fieldnames, list(reader)
    rows[0]["label"] = get_metric(METRIC).annotation_labels[0]
    rows[2]["label"] = "maybe"
    with (tmp_path / "filled.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerow({c: "" for c in columns})  # a blank row is skipped, but counts as a spreadsheet row
        writer.writerows(rows)
    capsys.readouterr()
    assert cli.main(["annotate", "import", str(tmp_path / "filled.csv"), "--annotator", "ann"]) == 2
    err = capsys.readouterr().err
    assert re.search(r": (row 5 \(lines? [0-9-]+\)|line 5): label 'maybe' is not allowed", err), err
    assert _count(engine, "human_labels") == 0


def test_export_a_simulated_annotator_import_then_agreement_round_trips_from_the_cli(month, tmp_path, capsys):
    """The maintainer's loop from the CLI: export a blind sample, an annotator (simulated: the judge's own
    labels with 10% flipped, seeded) fills it in, import it, and `deepscholar judges agreement` reports exactly the
    agreement the flips leave, with the flipped items off the confusion matrix's diagonal."""
    import random

    rows = _export(month, tmp_path / "sample", n=40, seed=11)
    judge = _judge_labels(month["engine"])
    rng = random.Random(2026)
    flipped = set(rng.sample(sorted(judge), round(0.1 * len(rows))))
    filled = []
    for row in rows:
        label = judge[row["item_id"]]
        if row["item_id"] in flipped:  # another allowed label, chosen by the seed
            label = rng.choice([x for x in row["allowed_labels"] if x != label])
        filled.append({**row, "label": label})
    assert cli.main(["annotate", "import", str(_write_jsonl(tmp_path / "filled.jsonl", filled)),
                     "--annotator", "sim"]) == 0

    capsys.readouterr()
    assert cli.main(["agreement", "--release", month["month"], "--metric", METRIC, "--judge", "local",
                     "--format", "json"]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert report["metric"] == METRIC and report["n_items"] == len(rows) and report["n_annotators"] == 1
    assert report["percent_agreement"] == pytest.approx(1 - len(flipped) / len(rows))  # 0.9
    assert report["ci"][0] <= report["percent_agreement"] <= report["ci"][1]
    off_diagonal = sum(n for a, row in report["confusion"].items() for b, n in row.items() if a != b)
    assert off_diagonal == len(flipped)
    assert report["cohen_kappa"] < 1
    assert "inter_annotator" not in report or report["inter_annotator"] is None
