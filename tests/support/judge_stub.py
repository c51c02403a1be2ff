"""A judge that answers every metric's prompt well-formed, for runs that judge whole months over real HTTP
(the benches, the scheduled month judged by an LLM judge), and RACE's release-time rubric prompts. Verdicts
vary deterministically with the prompt (RACE's weight samples also with the request's seed), so scores are
neither all 0 nor all 1 and a re-run gets the same answers."""

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
    # ReportBench's uncited claim support, first: its prompts quote reports and abstracts, whatever they hold.
    if "Its sentences that cite nothing" in prompt:  # extraction: about two sentences in three
        offered = re.findall(r"^(\d+)\. (.+)$", re.findall(r"<<<\n(.*?)\n>>>", prompt, re.DOTALL)[-1], re.MULTILINE)
        return json.dumps([{"sentence": int(n), "claim": text} for n, text in offered if (coin + int(n)) % 3])
    if "The papers the search found" in prompt:  # one claim's verdict
        if coin < 50:
            return json.dumps({"verdict": "supported", "papers": [1], "reason": "paper 1 says so"})
        if coin < 65:
            return json.dumps({"verdict": "contradicted", "papers": [1], "reason": "paper 1 says otherwise"})
        return json.dumps({"verdict": "not_enough_evidence", "papers": [], "reason": "the papers do not say"})
    if '"decision"' in prompt:
        return json.dumps({"decision": "A" if coin < 50 else "B", "explanation": "clearer grouping"})
    if '"grade"' in prompt:
        return json.dumps({"grade": coin % 3, "explanation": "by topic"})
    if (m := re.search(r"exactly (\d+) objects", prompt)) and '"article_1"' in prompt:  # RACE scoring
        grades = [((coin + 3 * i) % 11, (coin + 7 * i + 5) % 11) for i in range(int(m.group(1)))]
        return json.dumps([{"analysis": f"article {1 if a >= b else 2} meets criterion {i + 1} better",
                            "article_1": a, "article_2": b} for i, (a, b) in enumerate(grades)])
    if '"instruction_following": w3' in prompt:  # RACE's dimension weights: each sample (seed) its own answer
        seed = body.get("seed", 0)
        raw = [1 + (coin + seed * k) % 4 for k in (1, 2, 3, 5)]  # 1..4, re-normalised by the parser
        return json.dumps({**dict(zip(("comprehensiveness", "insight", "instruction_following", "readability"),
                                      raw, strict=True)), "reason": f"sample {seed}"})
    if (m := re.search(r"The quality to write criteria for: (\w+)", prompt)) and '"criterion"' in prompt:  # RACE
        return json.dumps([{"criterion": f"{m.group(1)} {k}", "explanation": f"meets {m.group(1)} point {k}",
                            "weight": 1 + (coin + k) % 3} for k in range(3 + coin % 3)])
    if (m := re.search(r"exactly (\d+) strings", prompt)) and '"unsupported"' in prompt:  # FACT
        return json.dumps(["supported" if (coin + i) % 5 < 3 else "unsupported" for i in range(int(m.group(1)))])
    if (m := re.search(r"exactly (\d+) strings", prompt)) and '"0", "1", "2" or "3"' in prompt:  # claims
        return json.dumps([str((coin + i) % 4) for i in range(int(m.group(1)))])
    if '"match"' in prompt:  # cited statement match
        if coin < 60:
            return json.dumps({"quote": "NOT_FOUND", "match": False, "reason": "not in the source"})
        return json.dumps({"quote": "as quoted", "match": True, "reason": "same claim"})
    if m := re.search(r"exactly (\d+) strings", prompt):
        labels = ["support", "partial_support", "not_support"]
        return json.dumps([labels[(coin + i) % 3] for i in range(int(m.group(1)))])
    if '"supported"' in prompt:
        return json.dumps({"supported": coin < 60, "explanation": "as stated"})
    return "unrecognised prompt"
