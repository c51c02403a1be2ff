"""A report's text (markdown a system wrote: untrusted) as HTML that can be put in the page as it is.

Design notes: docs/MODULE_NOTES.md, `deepscholar.web.report_text`.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markupsafe import Markup

__all__ = ["report_html", "LINK_REL"]

LINK_REL = "nofollow noopener noreferrer"
_SCHEMES = ("", "http", "https", "mailto")
_CITATION = re.compile(r"\[(\d+)\]")
HEADING_SHIFT = 2


def _allowed_link(url: str) -> bool:
    try:
        scheme = urlsplit(url.strip()).scheme.lower()
    except ValueError:
        return False
    return scheme in _SCHEMES


def _citation_tokens(text: str, template: Token) -> list[Token]:
    """`text` split into text tokens and links to #source-n for each [n] in it."""
    out: list[Token] = []
    pos = 0
    for match in _CITATION.finditer(text):
        if match.start() > pos:
            out.append(_text_token(text[pos:match.start()], template))
        link = Token("link_open", "a", 1, attrs={"href": f"#source-{match.group(1)}"}, level=template.level)
        link.meta["citation"] = True
        out += [link, _text_token(match.group(0), template), Token("link_close", "a", -1, level=template.level)]
        pos = match.end()
    if pos < len(text):
        out.append(_text_token(text[pos:], template))
    return out


def _text_token(content: str, template: Token) -> Token:
    return Token("text", "", 0, content=content, level=template.level)


def _link_citations(state: StateCore) -> None:
    """Core rule: [n] in text outside links becomes a link to source n."""
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        depth = 0  # inside a link written in the report: leave its text alone (no nested links)
        for tok in block.children:
            if tok.type == "link_open":
                depth += 1
            elif tok.type == "link_close":
                depth -= 1
            if tok.type == "text" and depth == 0 and _CITATION.search(tok.content):
                children += _citation_tokens(tok.content, tok)
            else:
                children.append(tok)
        block.children = children


def _lower_headings(state: StateCore) -> None:
    for tok in state.tokens:
        if tok.type in ("heading_open", "heading_close"):
            tok.tag = f"h{min(6, int(tok.tag[1:]) + HEADING_SHIFT)}"


def _render_link_open(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    if not token.meta.get("citation"):
        token.attrSet("rel", LINK_REL)
    return self.renderToken(tokens, idx, options, env)


def _make_parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False})
    md.disable(["html_block", "html_inline", "image"])
    default_validate = md.validateLink
    md.validateLink = lambda url: default_validate(url) and _allowed_link(url)  # type: ignore[method-assign]
    md.core.ruler.push("link_citations", _link_citations)
    md.core.ruler.push("lower_headings", _lower_headings)
    md.add_render_rule("link_open", _render_link_open)
    return md


_MD = _make_parser()


def report_html(text: str | None) -> Markup:
    """The report's markdown as sanitised HTML (safe to insert unescaped: see the module docstring)."""
    return Markup(_MD.render(text or "").strip())
