"""A report's markdown on the page: rendered as HTML, with nothing a system wrote able to become markup
beyond what markdown itself makes (no raw HTML, no images, no javascript:/data: links)."""

from __future__ import annotations

from support.chromium import parse_html

from deepscholar.web.report_text import LINK_REL, report_html


def _dom(text: str):
    return parse_html(f"<div>{report_html(text)}</div>")


def test_headings_lists_emphasis_and_code_render_as_html():
    dom = _dom("# Related work\n\nDense retrieval is *fast* and **strong** [1].\n\n"
               "## Methods\n\n- first [2]\n- second\n\n1. one\n2. two\n\n`code [3]`\n")
    # Headings sit two levels down: the page's own <h1> and <h2> come first.
    assert [h.text() for h in dom.find_all("h3")] == ["Related work"]
    assert [h.text() for h in dom.find_all("h4")] == ["Methods"]
    assert dom.one("em").text() == "fast" and dom.one("strong").text() == "strong"
    assert [li.text() for li in dom.one("ul").find_all("li")] == ["first [2]", "second"]
    assert [li.text() for li in dom.one("ol").find_all("li")] == ["one", "two"]
    # Citation markers link to their source; not inside code.
    assert [a.attrs["href"] for a in dom.find_all("a")] == ["#source-1", "#source-2"]
    assert dom.one("code").text() == "code [3]"


def test_raw_html_and_script_links_stay_text():
    text = ('<script>alert(1)</script> <img src=x onerror=alert(2)> <b>bold</b>\n\n'
            '[click](javascript:alert(3)) [data](data:text/html;base64,PHNjcmlwdD4=) <javascript:alert(4)>\n\n'
            '![pic](data:image/png;base64,AAAA) ![remote](https://example.org/x.png) '
            '[JS](JaVaScRiPt:alert(5)) [ok](https://example.org/paper "Title")\n\n'
            '<div onclick="alert(6)">block</div>\n')
    html = str(report_html(text))
    dom = parse_html(f"<div>{html}</div>")
    assert dom.find_all("script") == [] and dom.find_all("img") == [] and dom.find_all("b") == []
    assert dom.find_all("div") == [dom.one("div")], "raw HTML blocks are not passed through"
    for el in dom.iter():
        assert not [a for a in el.attrs if a.lower().startswith("on")], (el.tag, el.attrs)
    links = [(a.attrs["href"], a.attrs.get("rel")) for a in dom.find_all("a")]
    assert ("https://example.org/paper", LINK_REL) in links
    assert all(href.startswith(("https://", "#source-")) for href, _ in links), links
    shown = dom.text()
    assert "<script>alert(1)</script>" in shown and "javascript:alert(3)" in shown
    assert "<div onclick=\"alert(6)\">block</div>" in shown


def test_a_link_written_around_a_citation_is_not_nested():
    dom = _dom("See [the survey [4]](https://example.org/survey) and [5].")
    assert [(a.attrs["href"], a.text()) for a in dom.find_all("a")] == [
        ("https://example.org/survey", "the survey [4]"), ("#source-5", "[5]")]


def test_empty_text_renders_nothing():
    assert str(report_html(None)) == "" and str(report_html("")) == ""
