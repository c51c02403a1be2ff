"""Do the benchmarks agree? The rank correlation between every pair of families' boards of a month.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.boards.rank_agreement`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.evaluation.metrics import registry

__all__ = ["competition_ranks", "kendall_tau", "rank_agreement", "in_registry_order", "load_agreement", "format_agreement",
           "tau_text", "movers_text"]


def competition_ranks(values: Sequence[float | None]) -> list[int]:
    """Competition ranks (ties share the better rank), best first; a missing value ranks last."""
    arr = np.array([np.nan if v is None else v for v in values], dtype=float)
    known = arr[~np.isnan(arr)]
    return [int((known > v).sum()) + 1 if not np.isnan(v) else int(known.size) + 1 for v in arr]


def _clean(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> tuple[float | None, float | None]:
    """Kendall's tau-b (SciPy) between two boards' values of the same systems, and its p-value; (None, None)
    with fewer than 2 systems or when a board gives them all the same value (no ranking to compare).
    Shared by the families' agreement here and the judge-vs-judge comparison (judge_comparison.py)."""
    if len(a) != len(b):
        raise ValueError(f"two boards must rank the same systems: {len(a)} values against {len(b)}")
    if len(a) < 2 or np.ptp(a) <= 0 or np.ptp(b) <= 0:
        return None, None
    # Imported here, not at the top: `leaderboard --agreement` only reads stored rows (scipy.stats: 0.5 s).
    from scipy import stats

    result = stats.kendalltau(a, b)
    return _clean(float(result.statistic)), _clean(float(result.pvalue))


def rank_agreement(headlines: Mapping[str, Mapping[str, float | None]],
                   reference_systems: frozenset[str] | set[str] = frozenset(), *, max_movers: int = 5) -> list[dict]:
    """Do the families' boards agree? For every pair of families (in registry order): Kendall's tau-b
    between their headline rankings over the competing systems both boards rank with a value, its p-value,
    and the systems whose rank moves most between them (ranks re-counted among those shared systems).

    The reference systems (the human exemplar) are left out: they do not compete on any board, and some of
    their scores are fixed by construction. tau is None with fewer than 2 shared systems or when a board
    gives them all the same value (no ranking to compare)."""
    families = sorted(headlines, key=registry.family_order)
    out = []
    for i, fa in enumerate(families):
        for fb in families[i + 1:]:
            a, b = sorted((fa, fb))
            shared = sorted(s for s in set(headlines[a]) & set(headlines[b]) if s not in reference_systems
                            and headlines[a][s] is not None and headlines[b][s] is not None)
            va = [float(headlines[a][s]) for s in shared]  # type: ignore[arg-type]
            vb = [float(headlines[b][s]) for s in shared]  # type: ignore[arg-type]
            tau, p = kendall_tau(va, vb)
            ranks_a, ranks_b = competition_ranks(va), competition_ranks(vb)
            moved = sorted(((rb - ra, s, ra, rb) for s, ra, rb in zip(shared, ranks_a, ranks_b, strict=True)
                            if ra != rb), key=lambda m: (-abs(m[0]), m[1]))
            moves = [{"system_id": s, "rank_a": ra, "rank_b": rb, "shift": shift} for shift, s, ra, rb in moved]
            out.append({"family_a": a, "family_b": b, "n_systems": len(shared), "kendall_tau": tau,
                        "p_value": p, "movers": moves[:max_movers]})
    return out



_SQL = """
    SELECT release_id, month, judge_config, family_a, family_b, n_systems, kendall_tau, p_value, movers
    FROM leaderboard_agreement WHERE release_id = :r AND judge_config = :j
    ORDER BY family_a, family_b"""


def in_registry_order(rows: Sequence[Mapping]) -> list[dict]:
    """Stored pairs (family_a < family_b by name) as readers see them: board A the earlier family in the
    registry's order (the core first), the moves read from A to B, pairs sorted the same way."""
    out = []
    for row in rows:
        row = dict(row)
        if isinstance(row.get("movers"), str):
            row["movers"] = json.loads(row["movers"])
        if registry.family_order(row["family_a"]) > registry.family_order(row["family_b"]):
            row["family_a"], row["family_b"] = row["family_b"], row["family_a"]
            row["movers"] = [{"system_id": m["system_id"], "rank_a": m["rank_b"], "rank_b": m["rank_a"],
                              "shift": -m["shift"]} for m in row["movers"] or []]
        out.append(row)
    return sorted(out, key=lambda r: (registry.family_order(r["family_a"]), registry.family_order(r["family_b"])))


def load_agreement(engine: Engine, release_id: str, judge_config: str) -> list[dict]:
    """The stored agreement rows of one board (release, judge), in the registry's family order."""
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(sa.text(_SQL), {"r": release_id, "j": judge_config}).mappings()]
    return in_registry_order(rows)


def tau_text(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f}"


def movers_text(movers: Sequence[dict]) -> str:
    """The biggest rank moves as a reader reads them, e.g. "oracle 3→1; extractive 1→2"."""
    if not movers:
        return "same order"
    return "; ".join(f"{m['system_id']} {m['rank_a']}→{m['rank_b']}" for m in movers[:3])


def format_agreement(rows: Sequence[dict], fmt: str = "table") -> str:
    """table | markdown | csv | json of load_agreement's rows."""
    if fmt == "json":
        return json.dumps([{**r, "month": None if r.get("month") is None else r["month"].isoformat()}
                           for r in rows], indent=2)
    head = ["Board A", "Board B", "Systems", "Kendall tau", "p", "Biggest rank moves (A→B)"]
    body = [[registry.family_label(r["family_a"]), registry.family_label(r["family_b"]), str(r["n_systems"]),
             tau_text(r["kendall_tau"]), "n/a" if r["p_value"] is None else f"{r['p_value']:.3g}",
             movers_text(r["movers"])] for r in rows]
    if fmt == "csv":
        import csv
        import io

        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["release_id", "judge_config", "family_a", "family_b", "n_systems", "kendall_tau", "p_value",
                         "movers"])
        for r in rows:
            writer.writerow([r["release_id"], r["judge_config"], r["family_a"], r["family_b"], r["n_systems"],
                             "" if r["kendall_tau"] is None else r["kendall_tau"],
                             "" if r["p_value"] is None else r["p_value"], json.dumps(r["movers"])])
        return buf.getvalue()
    if not rows:
        return "(no agreement rows: a month needs boards of at least two families, e.g. the core and a track)"
    title = f"Do the boards agree? {rows[0]['release_id']} · judge {rows[0]['judge_config']}"
    note = ("Kendall's tau-b between the two boards' headline rankings (core: geometric mean; a track: its "
            "ranking metric) over the competing systems both rank; +1 = same order, -1 = reversed.")
    if fmt == "markdown":
        lines = [f"**{title}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in b) + " |" for b in body]
        return "\n".join([*lines, "", note])
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([title, line(head), line(["-" * w for w in widths]), *map(line, body), "", note])
