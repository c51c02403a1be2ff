"""`deepscholar annotate export | import`, `judges agreement | compare | drift`: validating the judge, against
human labels and against other judge configs. `agreement` is the older spelling of `judges agreement` (an
alias: same arguments and output)."""

from __future__ import annotations

import json
import sys

from deepscholar.cli.common import named_release, positive_int, ready_engine

AGREEMENT_HELP = ("how far the judge agrees with human labels, per metric (percent agreement, Cohen's kappa, "
                  "confusion, humans' Krippendorff alpha)")


def add_commands(sub) -> None:
    """annotate export | import, agreement (alias), judges compare | drift | agreement."""
    _add_annotate(sub)
    _add_agreement_args(sub.add_parser("agreement", help=AGREEMENT_HELP))

    judges = sub.add_parser("judges", help="judge validation across judge configs").add_subparsers(
        dest="judges_command", required=True)
    p = judges.add_parser("compare", help="two judge configs on one month: item agreement and kappa per metric, "
                                          "score deltas per system, rank stability of the boards (stored)")
    p.add_argument("--release", required=True)
    p.add_argument("--a", required=True, metavar="CONFIG_A",
                   help="a judge config (e.g. local:all-MiniLM-L6-v2:v1) or a judge spec ('local', a model)")
    p.add_argument("--b", required=True, metavar="CONFIG_B", help="the other one, likewise")
    p.add_argument("--format", choices=["table", "json", "markdown"], default="table")
    p.set_defaults(func=cmd_judges_compare)
    _add_judges_drift(judges)
    _add_agreement_args(judges.add_parser("agreement", help=AGREEMENT_HELP))


def _add_agreement_args(p) -> None:
    """`judges agreement` (judge vs human labels) and its alias `agreement`."""
    p.add_argument("--release", required=True)
    p.add_argument("--metric", default=None, help="one annotatable metric (default: every one with human labels)")
    p.add_argument("--judge", default=None, help="judge config, or a judge spec as `evaluate --judge` takes it "
                                                 "(default: DEEPSCHOLAR_JUDGE)")
    p.add_argument("--format", choices=["table", "json", "markdown"], default="table")
    p.set_defaults(func=cmd_judges_agreement)


def _add_annotate(sub) -> None:
    """annotate export | import: human labels for judge validation."""
    ann = sub.add_parser("annotate", help="human labels for judge validation: export a blind sample of a metric's "
                                          "judged items, import annotators' labels").add_subparsers(
        dest="annotate_command", required=True)
    p = ann.add_parser("export", help="write a blind sample of one metric's judged units (OUT.jsonl and OUT.csv), "
                                      "stratified over systems and the judge's labels, and record it")
    p.add_argument("--release", required=True, help="the release, e.g. 2025-06")
    p.add_argument("--metric", required=True, help="a judged metric (core or track), e.g. citation_precision")
    p.add_argument("--judge", default=None,
                   help="whose judgments: 'local', a litellm model string (as `evaluate --judge`) or a stored judge "
                        "config such as llm:openai/gpt-4o (default: DEEPSCHOLAR_JUDGE, else local)")
    p.add_argument("--n", type=positive_int, required=True, help="how many units to sample")
    p.add_argument("--seed", type=int, required=True, help="the sample's seed: the same seed draws the same units")
    p.add_argument("--out", required=True, metavar="FILE",
                   help="output name: FILE.jsonl and FILE.csv are written (a .jsonl or .csv suffix is dropped first)")
    p.set_defaults(func=cmd_annotate_export)
    p = ann.add_parser("import", help="store annotators' labels from a filled annotation file (JSONL or CSV); a "
                                      "bad row refuses the whole file")
    p.add_argument("file", help="the annotation file, with at least the columns item_id and label")
    p.add_argument("--annotator", default=None,
                   help="who labelled it (a row's own 'annotator' column wins); required unless every labelled "
                        "row names its annotator")
    p.set_defaults(func=cmd_annotate_import)


def _add_judges_drift(judges) -> None:
    p = judges.add_parser("drift", help="re-judge the judge's fixed calibration slice for a month, bypassing the "
                                        "cache, and report agreement and the drift alarm (as the benchmark DAG does)")
    p.add_argument("--release", required=True, help="the month the check is for (its current version)")
    p.add_argument("--judge", default=None, metavar="CONFIG",
                   help="'local' or a litellm model string (default: DEEPSCHOLAR_JUDGE)")
    p.add_argument("--metrics", nargs="+", metavar="METRIC",
                   help="only these metrics (default: every metric a human could annotate)")
    p.add_argument("--api-base", default=None, help="judge API base URL (default: DEEPSCHOLAR_JUDGE_API_BASE)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_judges_drift)


def cmd_annotate_export(args) -> int:
    from deepscholar.evaluation.judge_validation.annotation import export_sample

    engine = ready_engine()
    result = export_sample(engine, named_release(engine, args.release), args.metric, args.judge, args.n, args.seed,
                           args.out)
    files = " and ".join(str(f) for f in result.files)
    again = " (the same draw as an earlier export: its record is reused)" if result.reused else ""
    print(f"sample {result.sample_id}: {result.n_items} of {result.n_candidates} scored {result.metric} units of "
          f"{result.release_id} under {result.judge_config}, stratified over {result.n_strata} (system, judge "
          f"label) strata, seed {args.seed}{again}; wrote {files} (blind: fill the 'label' column, then "
          "`deepscholar annotate import FILE --annotator NAME`)")
    return 0


def _listed(names: list[str], most: int = 20) -> str:
    """Names for one line: the first `most`, then how many more."""
    if not names:
        return "none"
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def cmd_annotate_import(args) -> int:
    from deepscholar.evaluation.judge_validation.annotation import import_labels

    s = import_labels(ready_engine(), args.file, args.annotator)
    print(f"imported {s.path}: {s.stored} labels stored, {s.replaced} replaced (the old ones kept in the history), "
          f"{s.unchanged} unchanged, {s.skipped_empty} rows without a label skipped; annotators: "
          f"{_listed(s.annotators)}; judge-vs-humans agreement stored anew: {s.agreement_rows} "
          f"(metric, judge) entries")
    return 0


def cmd_judges_agreement(args) -> int:
    from deepscholar.evaluation.judge_spec import JudgeSpec
    from deepscholar.evaluation.judge_validation.judge_vs_humans import (
        agreement_report,
        format_agreement_report,
        lock_labels,
        save_agreement,
    )
    from deepscholar.settings import current_settings

    engine = ready_engine()
    release = named_release(engine, args.release)
    judge = JudgeSpec.parse(args.judge or current_settings().judge).config_id
    # Computed on connections of its own (none held meanwhile: the pool rule), then stored under the labels'
    # lock in one short transaction: what the page then shows.
    report = agreement_report(engine, release, args.metric, judge)
    with engine.begin() as conn:
        lock_labels(conn)
        save_agreement(conn, release, judge, report)
    print(format_agreement_report(report, args.format))
    return 0


def cmd_judges_compare(args) -> int:
    from deepscholar.evaluation.judge_validation.judge_comparison import compare_judges, format_comparison

    engine = ready_engine()
    result = compare_judges(engine, named_release(engine, args.release), args.a, args.b)
    print(format_comparison(result, args.format))
    return 0


def cmd_judges_drift(args) -> int:
    from deepscholar.evaluation.judge_spec import JudgeSpec
    from deepscholar.evaluation.judge_validation.drift import check_drift, format_drift
    from deepscholar.settings import current_settings

    engine = ready_engine()
    check = check_drift(engine, named_release(engine, args.release),
                        JudgeSpec.parse(args.judge or current_settings().judge),
                        metrics=args.metrics or None, api_base=args.api_base,
                        say=lambda line: print(line, file=sys.stderr))
    if args.json:
        print(json.dumps({"release_id": check.release_id, "judge_config": check.judge_config,
                          "summary": check.summary, "refused": check.refused,
                          "predicted_cost_usd": check.predicted_cost_usd, "cost_usd": check.cost_usd,
                          "metrics": [{k: v for k, v in vars(d).items() if k != "request_hashes"}
                                      for d in check.metrics]}, default=str, indent=2))
    else:
        print(format_drift(check))
    return 1 if check.tripped else 0
