"""The fault suite's figures: cases tried and passed, warehouse checks, rows lost, keys duplicated.

Counted where the cases run (tests/faults/conftest.py's assert_no_loss adds warehouse figures; the root
conftest's report hook counts outcomes of tests/faults items) and printed at the end of the session.
Under pytest-xdist the cases run in worker processes: outcomes reach the controller with every test
report, and each worker sends its warehouse figures back when it ends.
"""

from __future__ import annotations

FAULTS_PREFIX = "tests/faults/"
WAREHOUSE_COUNTS = ("warehouse_checks", "rows_lost", "keys_duplicated")
TALLY = {"warehouse_checks": 0, "rows_lost": 0, "keys_duplicated": 0, "passed": 0, "failed": 0, "skipped": 0}


def count_report(report) -> None:
    if not report.nodeid.startswith(FAULTS_PREFIX):
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        outcome = "passed" if report.passed else ("skipped" if report.skipped else "failed")
        TALLY[outcome] += 1


def send_from_worker(config) -> None:
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["fault_warehouse_counts"] = {k: TALLY[k] for k in WAREHOUSE_COUNTS}


def merge_from_worker(node) -> None:
    for key, value in (getattr(node, "workeroutput", None) or {}).get("fault_warehouse_counts", {}).items():
        TALLY[key] += value


def summary_line() -> str | None:
    tried = TALLY["passed"] + TALLY["failed"]
    if not tried and not TALLY["skipped"]:
        return None
    return (f"fault suite: {tried} cases tried, {TALLY['passed']} passed, {TALLY['failed']} failed, "
            f"{TALLY['skipped']} skipped; {TALLY['warehouse_checks']} warehouse checks: "
            f"{TALLY['rows_lost']} rows lost, {TALLY['keys_duplicated']} natural keys duplicated")
