"""Great Expectations plumbing shared by every gate: the release gate, the systems' report checks and the
leaderboard check each build their own expectations over their own frames and run them here.

Design notes: docs/MODULE_NOTES.md, `deepscholar.gx`.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Check", "GateResult", "import_gx", "run_checks", "jsonable", "short"]

_MAX_DETAIL_ROWS = 50


@dataclass
class Check:
    name: str
    frame: str
    expectation: Any  # a gxe.Expectation
    index_columns: list[str]


@dataclass
class GateResult:
    """Outcome of one gate run; stored as JSON on the releases row so a status can be traced to checks."""

    release_id: str
    success: bool
    checks: list[dict[str, Any]]
    summary: str
    gx_version: str = ""
    duration_seconds: float = 0.0
    ran_at: str = ""
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def failed_checks(self) -> list[str]:
        return [c["name"] for c in self.checks if not c["success"]]

    def to_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def run_checks(gx, checks: list[Check], frames: dict[str, pd.DataFrame]) -> list[dict]:
    """One suite per frame; GX validates each frame once with all of its expectations."""
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    source = context.data_sources.add_pandas(name="release_frames")
    results: dict[str, dict] = {}
    for frame_name in dict.fromkeys(c.frame for c in checks):
        frame_checks = [c for c in checks if c.frame == frame_name]
        batch = source.add_dataframe_asset(name=frame_name).add_batch_definition_whole_dataframe("whole")
        suite = context.suites.add(gx.ExpectationSuite(name=f"release_{frame_name}"))
        for check in frame_checks:
            check.expectation.meta = {"check": check.name}
            suite.add_expectation(check.expectation)
        index_columns = list(dict.fromkeys(col for c in frame_checks for col in c.index_columns))
        result_format: dict[str, Any] = {"result_format": "COMPLETE"}
        if index_columns:
            result_format["unexpected_index_column_names"] = index_columns
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=f"release_{frame_name}", data=batch, suite=suite))
        run = definition.run(batch_parameters={"dataframe": frames[frame_name]}, result_format=result_format)
        for res in run.results:
            name = str((res.expectation_config.meta or {}).get("check"))  # set on every expectation above
            results[name] = _check_record(name, res)
    return [results[c.name] for c in checks]


def _check_record(name: str, res) -> dict:
    """A compact, JSON-able record of one expectation result: what was seen and which rows broke it."""
    raw = dict(res.result or {})
    if "observed_value" in raw:
        observed: Any = raw["observed_value"]
    else:
        observed = {k: raw.get(k) for k in ("element_count", "unexpected_count", "missing_count")}
    details: dict[str, Any] = {}
    rows = raw.get("unexpected_index_list") or []
    if rows and isinstance(rows[0], dict):
        details["unexpected_rows"] = rows[:_MAX_DETAIL_ROWS]
    elif raw.get("partial_unexpected_list"):
        details["unexpected_values"] = raw["partial_unexpected_list"][:_MAX_DETAIL_ROWS]
    exc = res.exception_info or {}
    if exc.get("raised_exception"):
        details["exception"] = exc.get("exception_message")
    return {"name": name, "expectation_type": res.expectation_config.type, "success": bool(res.success),
            "observed": observed, "details": details}


def import_gx():
    """GX logs hundreds of INFO lines while importing; they would drown the task log of the gate."""
    gx_logger = logging.getLogger("great_expectations")
    if gx_logger.level == logging.NOTSET:
        gx_logger.setLevel(logging.WARNING)
    import great_expectations as gx
    import great_expectations.expectations as gxe

    return gx, gxe


def jsonable(value: Any) -> Any:
    """GX results carry numpy scalars, Timestamps and NaN; JSONB needs plain values. pandas is not imported
    here: a module that only names a Check (every metric does, through the registry) would pay a second of
    start-up for it, and a value can be pandas' NaT or NA only once pandas is loaded."""
    pandas = sys.modules.get("pandas")
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [jsonable(v) for v in value]
    if value is None or (pandas is not None and (value is pandas.NaT or value is pandas.NA)):
        return None
    if isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, datetime | date):  # pandas' Timestamp is a datetime
        return value.isoformat()
    if hasattr(value, "item"):  # numpy scalar
        return jsonable(value.item())
    return str(value)


def short(value: Any, limit: int = 300) -> str:
    text = json.dumps(jsonable(value))
    return text if len(text) <= limit else text[:limit] + "…"
