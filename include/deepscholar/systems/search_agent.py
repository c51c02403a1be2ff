"""`search_agent`: a ReAct-style tool-calling agent with one `search(query)` tool (litellm function calling).

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.search_agent`.
"""

from __future__ import annotations

import json
from typing import Any

from deepscholar.errors import SystemFailure
from deepscholar.llm.client import ParseError
from deepscholar.prompts import Prompt
from deepscholar.search.base import SearchResult, SearchTool
from deepscholar.systems.base import (
    Query,
    Report,
    Source,
    System,
    SystemContext,
    register_system,
)
from deepscholar.systems.deepscholar_base import (
    build_llm_client,
    cited_numbers,
    llm_config_schema,
    llm_system_settings,
    load_system_prompt,
    make_snippet,
    parse_section,
    source_key,
)

__all__ = ["SearchAgent", "SEARCH_TOOL"]

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search arXiv for prior work published before the paper. Returns numbered results "
                       "with title, date and abstract; cite a result as [n] with its number.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "a short keyword query"}},
            "required": ["query"],
        },
    },
}
DEFAULTS: dict[str, Any] = {"max_steps": 5, "search_k": 10, "snippet_chars": 1200, "concurrency": 8}


class _Sources:
    """Sources in order of first sight; a paper seen again keeps its number."""

    def __init__(self, snippet_chars: int) -> None:
        self.snippet_chars = snippet_chars
        self.sources: list[Source] = []
        self._by_key: dict[str, Source] = {}

    def add(self, result: SearchResult) -> tuple[Source, bool]:
        key = source_key(result.arxiv_id, result.title) or f"unkeyed:{len(self.sources)}"
        if key in self._by_key:
            return self._by_key[key], False
        source = Source(idx=len(self.sources) + 1, title=result.title,
                        snippet=make_snippet(result.abstract, self.snippet_chars), arxiv_id=result.arxiv_id,
                        url=result.url, published=result.published)
        self.sources.append(source)
        self._by_key[key] = source
        return source, True


@register_system("search_agent")
class SearchAgent(System):
    """Search-then-write by the model's own choice of queries, within a step budget."""

    version = "2"  # bump rule: systems/base.py System.version; 2: `local` search ranks with BM25
    defaults = DEFAULTS
    config_schema = llm_config_schema(DEFAULTS)

    def __init__(self, name: str, config: dict[str, Any], context: SystemContext):
        super().__init__(name, config, context)
        self.settings = llm_system_settings(self.kind, self.config, DEFAULTS)
        prompts = self.load_prompts()
        self.prompt, self.final_prompt = prompts["agent"], prompts["final"]

    @classmethod
    def load_prompts(cls) -> dict[str, Prompt]:
        return {"agent": load_system_prompt("search_agent_v1"), "final": load_system_prompt("search_agent_final_v1")}

    def generate(self, query: Query, search: SearchTool) -> Report:
        if search is None:
            raise SystemFailure("search_agent needs a search tool")
        s = self.settings
        client = build_llm_client(self.config, self.context, concurrency=s["concurrency"])
        book = _Sources(s["snippet_chars"])
        messages: list[dict[str, Any]] = [{"role": "user", "content": self.prompt.render(
            title=query.title, abstract=query.abstract, cutoff=query.cutoff.date().isoformat(),
            max_steps=s["max_steps"])}]
        steps: list[dict[str, Any]] = []
        calls = {"step": 0, "final": 0}
        answer = self._search_steps(client, messages, search, book, steps, calls)
        text = self._final_answer(client, messages, answer, len(book.sources), calls)
        trace = {
            "kind": self.kind, "model": client.model, "settings": s,
            "prompts": {"agent": self.prompt.version, "final": self.final_prompt.version},
            "steps": steps, "forced_final": answer is None,
            "counts": {"steps": len(steps), "searches": sum(1 for x in steps if "error" not in x),
                       "malformed": sum(1 for x in steps if "error" in x), "sources": len(book.sources),
                       "cited": len(set(cited_numbers(text)))},
            "calls": {**calls, "total": calls["step"] + calls["final"]},
        }
        return Report(text=text, sources=book.sources, trace=trace)

    def _search_steps(self, client: Any, messages: list[dict[str, Any]], search: SearchTool, book: _Sources,
                      steps: list[dict[str, Any]], calls: dict[str, int]) -> str | None:
        """The tool loop, within the step budget: the model's answer, or None when the budget ran out."""
        budget = self.settings["max_steps"]
        while len(steps) < budget:
            result = client.complete(messages, purpose=f"{self.kind}.step", tools=[SEARCH_TOOL],
                                     tool_choice="auto")
            calls["step"] += 1
            tool_calls = _clean_tool_calls(result.message.get("tool_calls"), turn=calls["step"])
            if not tool_calls:
                return result.text
            messages.append({"role": "assistant", "content": result.message.get("content"),
                             "tool_calls": tool_calls})
            for call in tool_calls:
                if len(steps) < budget:
                    content, record = self._run_tool(call, search, book)
                    steps.append({"step": len(steps) + 1, **record})
                else:
                    content = f"error: the budget of {budget} searches is spent; this call was not run"
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        return None

    def _final_answer(self, client: Any, messages: list[dict[str, Any]], answer: str | None, n: int,
                      calls: dict[str, int]) -> str:
        """The section: the model's answer when usable; else asked for once more (forced when it never
        answered, re-asked with the reason when its answer could not be used), else SystemFailure."""
        if answer is None:
            follow_up = [*messages, {"role": "user", "content": self.final_prompt.render()}]
        else:
            try:
                return parse_section(answer, n)
            except ParseError as exc:
                follow_up = [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": (
                    f"Your answer could not be used: {exc}. Answer again with only the section.")}]
        judged = client.ask(follow_up, lambda t: parse_section(t, n), purpose=f"{self.kind}.final",
                            max_tokens=None, tools=[SEARCH_TOOL], tool_choice="none")  # the section: no budget
        calls["final"] += judged.calls
        if not judged.scored:
            raise SystemFailure(f"final answer: {judged.unscored_reason}")
        return judged.value

    def _run_tool(self, call: dict, search: SearchTool, book: _Sources) -> tuple[str, dict[str, Any]]:
        """The tool message for one call and its trace record; a malformed call is answered, not raised."""
        name, raw = call["function"]["name"], call["function"]["arguments"]
        if name != "search":
            error = f"unknown tool {name!r}; the only tool is search(query)"
            return f"error: {error}", {"tool": name, "error": error}
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError as exc:
            error = f"the arguments are not valid JSON ({exc.msg}); send {{\"query\": \"...\"}}"
            return f"error: {error}", {"tool": name, "error": error, "arguments": raw}
        text = args.get("query") if isinstance(args, dict) else None
        if not isinstance(text, str) or not text.strip():
            error = 'the arguments need a non-empty string "query", e.g. {"query": "dense retrieval"}'
            return f"error: {error}", {"tool": name, "error": error, "arguments": raw}
        text = " ".join(text.split())
        results = search.search(text, k=self.settings["search_k"])
        lines, new = [], 0
        for r in results:
            source, is_new = book.add(r)
            new += is_new
            published = f" ({r.published.date().isoformat()})" if r.published else ""
            lines.append(f"[{source.idx}] {source.title}{published}\n{source.snippet or '(no abstract)'}")
        body = "\n\n".join(lines) if lines else "No results. Try other keywords."
        return (f'Results for "{text}":\n\n{body}',
                {"tool": name, "query": text, "results": len(results), "new_sources": new})


def _clean_tool_calls(calls: Any, *, turn: int) -> list[dict]:
    """Tool calls as the API expects them back in the history; a missing id gets a stable one."""
    cleaned = []
    for i, call in enumerate(calls or []):
        function = (call or {}).get("function") or {}
        arguments = function.get("arguments")
        cleaned.append({
            "id": call.get("id") or f"call_{turn}_{i}",
            "type": "function",
            "function": {"name": str(function.get("name") or ""),
                         "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)},
        })
    return cleaned
