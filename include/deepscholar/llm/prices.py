"""Per-token prices for the direct OpenAI-compatible path, read from the price table litellm ships.

Why not `litellm.cost_per_token`: importing litellm costs seconds of start-up (more on a busy machine),
and a judge task on the direct path (llm/openai_compatible.py) has no other use for it. The table is the
same JSON file litellm itself reads with LITELLM_LOCAL_MODEL_COST_MAP=True, found without importing the
package, so both paths price a model identically for the token counts a judge call has (litellm also
knows tiered prices above 128k/200k prompt tokens and per-request fees, which no judge prompt reaches;
those models are priced at their base rate here). A model the table does not know has no price: None.

A budget still has to count such a model's calls: `fallback_price_of` is the price it counts them at, stated
wherever it is used (the estimate, the approval, `deepscholar cost`): the highest chat price of the model's
provider in the same table (OpenAI's for a provider it does not know), prompt and completion apart.
`counted_cost_usd` is what a budget counts for one answer: its own cost when known, else its tokens (the
prediction's default tokens when the answer reports none) at the model's price, or the fallback.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["batch_cost_usd", "batch_price_of", "budget_price_of", "cost_usd", "counted_cost_usd", "fallback_price_of",
           "litellm_cost", "litellm_module", "price_of", "usd_text"]

BATCH_DISCOUNT = 0.5  # OpenAI's (and Anthropic's) batch APIs charge half the list price

log = logging.getLogger(__name__)

TABLE_FILE = "model_prices_and_context_window_backup.json"


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    spec = importlib.util.find_spec("litellm")  # locates the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        log.warning("litellm's price table is not installed: LLM costs are recorded as unknown")
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / TABLE_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("litellm's price table %s is unreadable (%s): LLM costs are recorded as unknown", path, exc)
        return {}


@functools.lru_cache(maxsize=256)
def price_of(name: str | None) -> tuple[float, float] | None:
    """(USD per prompt token, USD per completion token) of a model name, with or without its provider prefix."""
    if not name:
        return None
    table = _table()
    for candidate in (name, name.split("/", 1)[1] if "/" in name else None):
        entry = table.get(candidate) if candidate else None
        if isinstance(entry, dict) and entry.get("input_cost_per_token") is not None:
            return float(entry["input_cost_per_token"]), float(entry.get("output_cost_per_token") or 0.0)
    return None


def cost_usd(served: str | None, requested: str, prompt_tokens: int | None,
             completion_tokens: int | None) -> float | None:
    """The served model's price (a dated snapshot), else the requested one's; None when neither is known."""
    if prompt_tokens is None or completion_tokens is None:
        return None
    price = price_of(served) or price_of(requested)
    if price is None:
        return None
    return prompt_tokens * price[0] + completion_tokens * price[1]


@functools.lru_cache(maxsize=256)
def batch_price_of(name: str | None) -> tuple[float, float] | None:
    """(USD per prompt token, per completion token) through the provider's batch API: the table's batch
    prices when it has them (`*_cost_per_token_batches`), else half the list price (BATCH_DISCOUNT)."""
    listed = price_of(name)
    if listed is None or not name:
        return None
    table = _table()
    for candidate in (name, name.split("/", 1)[1] if "/" in name else None):
        entry = table.get(candidate) if candidate else None
        if isinstance(entry, dict) and entry.get("input_cost_per_token_batches") is not None:
            return (float(entry["input_cost_per_token_batches"]),
                    float(entry.get("output_cost_per_token_batches") or listed[1] * BATCH_DISCOUNT))
    return listed[0] * BATCH_DISCOUNT, listed[1] * BATCH_DISCOUNT


def batch_cost_usd(served: str | None, requested: str, prompt_tokens: int | None,
                   completion_tokens: int | None) -> float | None:
    """cost_usd at the batch price (batch_price_of): the served model's, else the requested one's."""
    if prompt_tokens is None or completion_tokens is None:
        return None
    price = batch_price_of(served) if price_of(served) else batch_price_of(requested)
    if price is None:
        return None
    return prompt_tokens * price[0] + completion_tokens * price[1]


FALLBACK_PROVIDER = "openai"  # how a provider the table has no chat price of is priced (and a bare model name)
# If litellm's table is missing altogether: about the dearest chat prices it lists (USD per token).
NO_TABLE_FALLBACK = (3e-05, 7.5e-05)


@functools.lru_cache(maxsize=64)
def fallback_price_of(name: str) -> tuple[float, float, str]:
    """(USD per prompt token, per completion token, how they were chosen) that a budget counts a call of a model
    without a price at: the highest chat prices of its provider (the name's prefix) in litellm's table, prompt
    and completion apart; a provider the table has no chat price of is priced as OpenAI's."""
    provider = name.split("/", 1)[0] if "/" in name else FALLBACK_PROVIDER
    chat = [e for e in _table().values() if isinstance(e, dict) and e.get("mode") == "chat"
            and e.get("input_cost_per_token") is not None]
    for who in (provider, FALLBACK_PROVIDER):
        own = [e for e in chat if e.get("litellm_provider") == who]
        if own:
            prompt = max(float(e["input_cost_per_token"]) for e in own)
            completion = max(float(e.get("output_cost_per_token") or 0.0) for e in own)
            return prompt, completion, (f"{who}'s highest chat price in litellm's table (${prompt * 1e6:,.2f} / "
                                        f"${completion * 1e6:,.2f} per million prompt / completion tokens)")
    prompt, completion = NO_TABLE_FALLBACK
    return prompt, completion, (f"${prompt * 1e6:,.2f} / ${completion * 1e6:,.2f} per million prompt / completion "
                                "tokens (litellm's price table is not installed)")


def budget_price_of(name: str, *, batch: bool = False) -> tuple[float, float, str | None]:
    """(USD per prompt token, per completion token, None or how a missing price was replaced): the price a
    budget predicts and counts a call of this model at: its own (at the batch price with `batch`), else
    fallback_price_of (not discounted: the provider's batch price of an unknown model is unknown too)."""
    price = batch_price_of(name) if batch else price_of(name)
    if price is not None:
        return price[0], price[1], None
    return fallback_price_of(name)


def counted_cost_usd(cost: float | None, served: str | None, requested: str, prompt_tokens: int | None,
                     completion_tokens: int | None, *, batch: bool = False) -> float:
    """What a budget counts for one answer: its cost when known; else its tokens (the prediction's default
    tokens, DEEPSCHOLAR_COST_PROMPT_TOKENS / _COMPLETION_TOKENS, for an answer reporting none) at the served or
    requested model's price, or at the fallback price."""
    if cost is not None:
        return cost
    from deepscholar.settings import current_settings

    settings = current_settings()
    prompt = settings.cost_prompt_tokens if prompt_tokens is None else prompt_tokens
    completion = settings.cost_completion_tokens if completion_tokens is None else completion_tokens
    served_price = (batch_price_of(served) if batch else price_of(served)) if served else None
    per_prompt, per_completion = served_price or budget_price_of(requested, batch=batch)[:2]
    return prompt * per_prompt + completion * per_completion


def litellm_module():
    """litellm, imported on first use (seconds of start-up), never fetching its cost map from the network."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner per failed call in task logs
    return litellm


@functools.lru_cache(maxsize=256)
def _priced_model(served: str | None, requested: str) -> str | None:
    """The name litellm's price table knows: the served model (a dated snapshot), else the requested one.
    Resolved once per pair: litellm's completion_cost resolves it again on every call (~1 ms each)."""
    litellm = litellm_module()
    for name in (served, requested):
        if not name:
            continue
        try:
            litellm.cost_per_token(model=name, prompt_tokens=1, completion_tokens=1)
            return name
        except Exception:  # unmapped model: litellm raises rather than returning None
            continue
    return None


def litellm_cost(served: str | None, requested: str, usage: Mapping[str, Any]) -> float | None:
    """The litellm path's price of one answer, from its own token counts and litellm's cost function;
    None, not 0, when no price is known."""
    name = _priced_model(served, requested)
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if name is None or prompt is None or completion is None:
        return None
    return float(sum(litellm_module().cost_per_token(model=name, prompt_tokens=prompt, completion_tokens=completion)))


def usd_text(x: float | None, *, decimals: int | None = None, unknown: str = "unknown", grouped: bool = True,
             sign: bool = True) -> str:
    """A USD amount as money is written everywhere: "$1,234.57", "$0.0012" (to the cent from a cent up and
    for zero, to 1/100 cent below), or to `decimals` places where a table aligns its column; `unknown` where
    the price is not known (None). One function so money reads alike in messages, tables and on the page;
    callers differ only in that precision, the word for an unknown price and, for a column headed "USD"
    (the board's costs) or the drift check's messages, no sign or no thousands separator."""
    if x is None:
        return unknown
    places = decimals if decimals is not None else 2 if x >= 0.01 or x == 0 else 4
    text = f"{x:,.{places}f}" if grouped else f"{x:.{places}f}"
    return "$" + text if sign else text
