"""A judge that answers every metric's prompt well-formed, for runs that judge whole months over real HTTP
(the benches, the scheduled month judged by an LLM judge). Verdicts vary deterministically with the prompt,
so scores are neither all 0 nor all 1 and a re-run gets the same answers."""

from __future__ import annotations

import hashlib
import json
import re

from support.openai_stub import first_user_text

__all__ = ["scripted_judge"]


def scripted_judge(body: dict) -> str:
    """A well-formed answer for each metric's prompt; yes/no verdicts vary deterministically with the prompt."""
    prompt = first_user_text(body)
    coin = int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 100
    if '"decision"' in prompt:
        return json.dumps({"decision": "A" if coin < 50 else "B", "explanation": "clearer grouping"})
    if '"grade"' in prompt:
        return json.dumps({"grade": coin % 3, "explanation": "by topic"})
    if m := re.search(r"exactly (\d+) strings", prompt):
        labels = ["support", "partial_support", "not_support"]
        return json.dumps([labels[(coin + i) % 3] for i in range(int(m.group(1)))])
    if '"supported"' in prompt:
        return json.dumps({"supported": coin < 60, "explanation": "as stated"})
    return "unrecognised prompt"
