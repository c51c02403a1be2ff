"""Hand-written .bib/.bbl snippets: arXiv id forms, messy BibTeX, and the .bbl fallback."""

from __future__ import annotations

import pytest
from support.files import write_tree

from deepscholar.sources.bibliography import (
    BibEntry,
    arxiv_id_from_entry,
    load_bibliography,
    parse_bbl,
    parse_bib_string,
    parse_bibliography,
)
from deepscholar.text.arxiv_ids import find_arxiv_id


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"eprint": "2301.01234", "archiveprefix": "arXiv"}, "2301.01234"),
        ({"eprint": "2301.01234v3", "archivePrefix": "arXiv"}, "2301.01234"),
        ({"eprint": "1803.10366v2", "eprinttype": "arxiv"}, "1803.10366"),
        ({"eprint": "cs/0601001", "archiveprefix": "arXiv"}, "cs/0601001"),
        ({"eprint": "math.GT/0309136v2"}, "math.GT/0309136"),
        ({"eprint": "hep-th/9901001"}, "hep-th/9901001"),
        ({"eprint": "arXiv:0704.0001"}, "0704.0001"),
        ({"url": "https://arxiv.org/abs/1706.03762v7"}, "1706.03762"),
        ({"url": "http://arxiv.org/pdf/1706.03762.pdf"}, "1706.03762"),
        ({"url": "https://arxiv.org/pdf/2106.09685v2"}, "2106.09685"),
        ({"url": "https://arxiv.org/abs/cond-mat/0207270"}, "cond-mat/0207270"),
        ({"doi": "10.48550/arXiv.2203.02155"}, "2203.02155"),
        ({"doi": "10.48550/ARXIV.2203.02155"}, "2203.02155"),
        ({"journal": "arXiv preprint arXiv:1708.03852"}, "1708.03852"),
        ({"journal": "arXiv preprint arXiv:2501.12345v2"}, "2501.12345"),
        ({"journal": "CoRR", "volume": "abs/1512.03385"}, "1512.03385"),
        ({"journal": "CoRR abs/1512.03385"}, "1512.03385"),
        ({"journal": "ArXiv", "volume": "abs/2005.14165"}, "2005.14165"),
        ({"note": "arXiv:1412.6980"}, "1412.6980"),
        ({"howpublished": "\\url{https://arxiv.org/abs/1810.04805}"}, "1810.04805"),
        # Not arXiv: a non-arXiv eprint, an ordinary DOI, a year-like number, an impossible month.
        ({"eprint": "2301.01234", "eprinttype": "pubmed"}, None),
        ({"doi": "10.1145/3292500.3330701"}, None),
        ({"journal": "Nature", "volume": "2019.1234"}, None),
        ({"journal": "arXiv preprint arXiv:1713.01234"}, None),
        ({}, None),
    ],
)
def test_arxiv_id_from_entry(fields, expected):
    assert arxiv_id_from_entry(fields) == expected


def test_arxiv_id_from_bib_entry_object():
    entry = BibEntry(key="k", entry_type="article", title="T", authors=None, year=None, doi=None,
                     eprint=None, url="https://arxiv.org/abs/2401.00001v1", journal=None)
    assert arxiv_id_from_entry(entry) == "2401.00001"
    assert find_arxiv_id("see arXiv: 2401.00001") == "2401.00001"
    assert find_arxiv_id("no id here 12.34") is None


MESSY_BIB = r"""
@preamble{ "\newcommand{\noop}[1]{}" }
@string{ nips = "Advances in Neural Information Processing Systems" }
@comment{ this is ignored }

@ARTICLE{Upper2020,
  Title = {{BERT}: Pre-training of {D}eep {B}idirectional Transformers},
  Author = {Devlin, Jacob and Chang, Ming-Wei},
  journal = {arXiv preprint arXiv:1810.04805},
  Year = 2019,
  month = mar,
}

@inproceedings{accents,
  title = {Sch{\"o}lkopf's {\'E}tude on caf\'{e} na\"ive},
  author = {Sch{\"o}lkopf, Bernhard and Ned{\'i}c, Angelia},
  booktitle = nips,
  year = {2012},
  url = {https://example.org/~user/paper_v1.pdf},
  doi = {https://doi.org/10.1000/xyz_123},
}

@misc{dup, title = {First}, year = {2001}}
@misc{dup, title = {Second}, year = {2002}}

@article{repeated, author = {A. One}, title = {Rep}, author = {B. Two}, year = {2003}}

@inproceedings{unclosed,
  title={Never Closed},
  author={Qiu, Weichao},
  year={2016}

@misc{after_unclosed, title = {Still Parsed}, howpublished = {\url{https://arxiv.org/abs/2002.00001}}}

@article{broken = this is not bibtex at all }

@Miscellaneous{odd-type, title = "Quoted {Title}", author = "Bubeck, S{\'e}bastien", year = "2011"}
@article{utf8, title = {Raw UTF-8 accents: Sébastien Nedić}, year = {2018}, eprint = {1803.10366v2},
         eprinttype = {arxiv}}
"""


def test_messy_bib_keeps_every_good_entry():
    bib = parse_bib_string(MESSY_BIB, "refs.bib")
    assert set(bib.entries) == {
        "Upper2020", "accents", "dup", "repeated", "unclosed", "after_unclosed", "odd-type", "utf8",
    }
    up = bib.entries["Upper2020"]
    assert up.entry_type == "article"
    assert up.title == "BERT: Pre-training of Deep Bidirectional Transformers"
    assert up.year == "2019"
    assert up.eprint == "1810.04805"
    assert up.raw_fields["month"] == "mar"
    assert up.source_file == "refs.bib"

    acc = bib.entries["accents"]
    assert acc.title == "Schölkopf's Étude on café naïve"
    assert acc.authors == "Schölkopf, Bernhard and Nedíc, Angelia"
    assert acc.journal == "Advances in Neural Information Processing Systems"  # @string resolved
    assert acc.url == "https://example.org/~user/paper_v1.pdf"  # not LaTeX-decoded
    assert acc.doi == "10.1000/xyz_123"

    assert bib.entries["dup"].title == "First"  # BibTeX keeps the first of duplicate keys
    assert bib.entries["repeated"].authors == "A. One"  # and the first of repeated fields
    assert bib.entries["unclosed"].title == "Never Closed"
    assert bib.entries["after_unclosed"].eprint == "2002.00001"
    assert bib.entries["after_unclosed"].url == "https://arxiv.org/abs/2002.00001"
    assert bib.entries["odd-type"].entry_type == "miscellaneous"
    assert bib.entries["odd-type"].title == "Quoted Title"
    assert bib.entries["odd-type"].authors == "Bubeck, Sébastien"
    assert bib.entries["utf8"].title == "Raw UTF-8 accents: Sébastien Nedić"
    assert bib.entries["utf8"].eprint == "1803.10366"

    failures = "\n".join(bib.failures)
    assert "dup" in failures and "repeated" in failures and "unclosed" in failures
    assert "broken" in failures


NATBIB_BBL = r"""\begin{thebibliography}{3}
\providecommand{\natexlab}[1]{#1}
\providecommand{\url}[1]{\texttt{#1}}

\bibitem[Adam et~al.(2024{\natexlab{a}})Adam, {\v{C}}erm{\'a}k, and
  Picek]{adam2024}
Lukáš Adam, Vojtěch Čermák, and Lukas Picek.
\newblock {SeaTurtleID2022}: {A} long-span dataset for reliable sea turtle
  re-identification.
\newblock In \emph{{WACV}}, pages 7131--7141, 2024{\natexlab{a}}.

\bibitem[Vaswani et~al.(2017)]{vaswani}
Ashish Vaswani and Noam Shazeer.
\newblock Attention is all you need.
\newblock \emph{arXiv preprint arXiv:1706.03762}, 2017.
\newblock \doi{10.48550/arXiv.1706.03762}.
\newblock URL \url{https://arxiv.org/abs/1706.03762}.

\bibitem{plain}
J.~Doe.
\newblock A title without a label.
\newblock \emph{J. Stuff}, 3(1):\penalty0 1--2, 1999.

\end{thebibliography}
"""


def test_natbib_bbl():
    bib = parse_bbl(NATBIB_BBL, "main.bbl")
    assert list(bib.entries) == ["adam2024", "vaswani", "plain"]
    adam = bib.entries["adam2024"]
    assert adam.title == "SeaTurtleID2022: A long-span dataset for reliable sea turtle re-identification"
    assert adam.authors == "Lukáš Adam, Vojtěch Čermák, and Lukas Picek"
    assert adam.year == "2024"
    vas = bib.entries["vaswani"]
    assert vas.title == "Attention is all you need"
    assert vas.eprint == "1706.03762"
    assert vas.doi == "10.48550/arXiv.1706.03762"
    assert vas.url == "https://arxiv.org/abs/1706.03762"
    plain = bib.entries["plain"]
    assert plain.title == "A title without a label"
    assert plain.year == "1999"
    assert plain.authors == "J. Doe"


BIBLATEX_BBL = r"""
\refsection{0}
  \datalist[entry]{nty/global//global/global}
    \entry{Douceur2002a}{inproceedings}{}
      \name{author}{1}{}{%
        {{hash=abc}{%
           family={Douceur},
           familyi={D\bibinitperiod},
           given={John\bibnamedelima R.},
           giveni={J\bibinitperiod}}}%
      }
      \field{title}{The {S}ybil Attack}
      \field{booktitle}{IPTPS}
      \field{year}{2002}
      \verb{eprint}
      \verb 2101.00001v2
      \endverb
      \field{eprinttype}{arxiv}
    \endentry
  \enddatalist
\endrefsection
"""


def test_biblatex_bbl():
    bib = parse_bbl(BIBLATEX_BBL, "paper.bbl")
    entry = bib.entries["Douceur2002a"]
    assert entry.entry_type == "inproceedings"
    assert entry.title == "The Sybil Attack"
    assert entry.year == "2002"
    assert "Douceur" in (entry.authors or "")
    assert entry.eprint == "2101.00001"


def test_project_uses_referenced_bibs_then_falls_back(tmp_path):
    doc = "\\documentclass{article}\n\\begin{document}\n%s\n\\end{document}\n"
    root = write_tree(tmp_path / "a", {
        "main.tex": doc % "% \\bibliography{old}\n\\bibliography{refs,extra}",
        "refs.bib": "@misc{a, title={A}}",
        "extra.bib": "@misc{b, title={B}}\n@misc{a, title={Dup}}",
        "old.bib": "@misc{c, title={C}}",
    })
    bib = load_bibliography(root)
    assert bib.sources == ["refs.bib", "extra.bib"]
    assert set(bib.entries) == {"a", "b"} and bib.entries["a"].title == "A"

    root = write_tree(tmp_path / "b", {
        "main.tex": doc % "\\addbibresource[label=x]{lib/refs.bib}",
        "lib/refs.bib": "@misc{x, title={X}}",
    })
    assert set(parse_bibliography(root)) == {"x"}

    root = write_tree(
        tmp_path / "c", {"main.tex": doc % "\\bibliography{missing}", "any.bib": "@misc{y, title={Y}}"}
    )
    assert set(parse_bibliography(root)) == {"y"}

    root = write_tree(tmp_path / "d", {"main.tex": doc % NATBIB_BBL})
    bib = load_bibliography(root)
    assert set(bib.entries) == {"adam2024", "vaswani", "plain"} and bib.sources == ["main.tex"]


def test_compiled_bbl_beats_stray_bib_when_named_bib_is_missing(tmp_path):
    doc = (
        "\\documentclass{article}\n\\begin{document}\nX \\cite{vaswani}.\n"
        "\\bibliography{refs}\n\\end{document}\n"
    )
    files = {"paper.tex": doc, "paper.bbl": NATBIB_BBL, "template/sample.bib": "@misc{s, title={S}}"}
    root = write_tree(tmp_path, files)
    bib = load_bibliography(root)
    assert bib.sources == ["paper.bbl"]
    assert "vaswani" in bib.entries and "s" not in bib.entries
