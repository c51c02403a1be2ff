"""What a judge's answer may be: its budget in tokens and its JSON schema, declared beside each question.

Design notes: docs/MODULE_NOTES.md, `deepscholar.llm.answer_shapes`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["CONSTRAINED_OUTPUTS", "LABEL_BUDGET", "EXPLAINED_BUDGET", "QUOTE_BUDGET", "TEXT", "object_schema", "array_of",
           "labels_schema", "per_item_budget", "response_format", "over_budget"]

# How a judge's answers can be constrained (JudgeSpec.output, LLMClient.constrained): each question's schema
# in `response_format`, OpenAI's way (`json_schema`) or as JSON mode with the schema beside it (`json_object`).
CONSTRAINED_OUTPUTS = ("json_schema", "json_object")

# A label and a sentence or two of explanation: about 40-70 tokens from a frontier model.
EXPLAINED_BUDGET = 320
# An answer that quotes a passage of a source besides its label and reason.
QUOTE_BUDGET = 640
# One label in an array of labels ("partial_support", with its quotes and comma: under 10 tokens).
LABEL_BUDGET = 12
# What a JSON array answer costs besides its elements (brackets, a fence, white space).
_ARRAY_OVERHEAD = 48

TEXT: dict[str, Any] = {"type": "string", "minLength": 1}


def object_schema(properties: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """An object with exactly these properties, all required."""
    return {"type": "object", "properties": {k: dict(v) for k, v in properties.items()},
            "required": list(properties), "additionalProperties": False}


def array_of(element: Mapping[str, Any], count: int | None = None) -> dict[str, Any]:
    """An array of `element`s; exactly `count` of them when given."""
    schema: dict[str, Any] = {"type": "array", "items": dict(element)}
    if count is not None:
        schema |= {"minItems": count, "maxItems": count}
    return schema


def labels_schema(labels: Sequence[str], count: int) -> dict[str, Any]:
    """Exactly `count` labels, each one of `labels`."""
    return array_of({"type": "string", "enum": list(labels)}, count)


def per_item_budget(count: int, tokens_each: int) -> int:
    """The budget of an array answer of `count` elements of about `tokens_each` tokens at most."""
    return _ARRAY_OVERHEAD + max(count, 1) * tokens_each


def response_format(mode: str, purpose: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The `response_format` asking a server for an answer of this shape. `json_schema`: OpenAI's shape,
    which vLLM, SGLang, llama.cpp's own llama-server and OpenAI accept. `json_object`: JSON mode with the
    schema beside it, llama-cpp-python's server's shape (it refuses OpenAI's with a 500 and turns this one
    into a grammar); a server that knows JSON mode but not the field still answers with a JSON object."""
    if mode == "json_object":
        return {"type": "json_object", "schema": dict(schema)}
    if mode != "json_schema":
        raise ValueError(f"constrained output must be one of {', '.join(CONSTRAINED_OUTPUTS)}, not {mode!r}")
    name = re.sub(r"[^A-Za-z0-9_-]", "_", purpose)[:64] or "answer"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": dict(schema), "strict": True}}


def over_budget(finish_reason: str | None, completion_tokens: int | None, max_tokens: int | None) -> str | None:
    """Why an answer cannot be used for its length (the client's ParseError), None when it is within budget:
    cut at it (finish reason "length"), or longer than it (a server that ignored max_tokens)."""
    if finish_reason == "length":
        return (f"the answer was cut at its budget of {max_tokens} tokens (finish reason length); it must be short"
                if max_tokens is not None else "the answer was cut at the server's length limit (finish reason length)")
    if max_tokens is not None and (completion_tokens or 0) > max_tokens:
        return f"the answer took {completion_tokens} tokens, over its budget of {max_tokens}"
    return None
