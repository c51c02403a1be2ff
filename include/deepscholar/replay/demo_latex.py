"""The demo snapshot's LaTeX: one candidate paper's project (main.tex, related-work file, .bib/.bbl) and
the record of what the related-work extractor should find in it."""

from __future__ import annotations

import random
import re
import unicodedata

from deepscholar.replay.demo_builder import GENERATOR_VERSION, _Builder
from deepscholar.replay.demo_data import IIR_BOOK, LATEX_ESCAPES, THEMES, CandidateSpec

# How each kind of reference is written in a .bib (the resolver must handle all of them).
ARXIV_BIB_STYLES = ["eprint", "url", "arxiv_doi", "journal_arxiv", "title_only"]


def _latex_name(name: str) -> str:
    return "".join(LATEX_ESCAPES.get(ch, ch) for ch in name)


def _first_word(title: str) -> str:
    stop = {"a", "an", "the", "how", "are", "of", "with", "for", "on"}
    for word in re.findall(r"[A-Za-z]+", title):
        if word.lower() not in stop:
            return word.lower()
    return "paper"


class _PaperWriter:
    """Writes one candidate's LaTeX project and records what the extractor should find in it."""

    def __init__(self, builder: _Builder, spec: CandidateSpec, arxiv_id: str) -> None:
        self.b = builder
        self.spec = spec
        self.arxiv_id = arxiv_id
        self.rng = random.Random(f"{builder.month}/{spec.num}/{GENERATOR_VERSION}")
        self.theme = THEMES[spec.theme]
        self.key_style = spec.num % 4
        self.keys: dict[str, str] = {}
        self.bib_styles: dict[str, str] = {}
        self._related: str | None = None
        for slug in spec.intro_cites + spec.cites:
            self._key(slug)
        self._comment_only_slug = self._pick_comment_only()

    # keys
    def _key(self, slug: str) -> str:
        if slug in self.keys:
            return self.keys[slug]
        if slug == IIR_BOOK["slug"]:
            key = "manning2008iir"
        else:
            ref = self.b.refs[slug]
            last = re.sub(r"[^A-Za-z]", "", _ascii(ref.authors[0].split()[-1])) or "anon"
            year = ref.published.year
            word = _first_word(ref.title)
            key = [f"{last.lower()}{year}{word}", f"{last}:{year}", f"{last.lower()}-etal-{year}-{word}",
                   f"{last.lower()}{year % 100:02d}{word[:4]}"][self.key_style]
        base, n = key, 0
        while key in self.keys.values():
            n += 1
            key = f"{base}{chr(ord('a') + n)}"
        self.keys[slug] = key
        return key

    def _pick_comment_only(self) -> str | None:
        if self.spec.layout != "section_table":
            return None
        for ref in self.b.refs.values():
            if ref.theme == self.spec.theme and ref.slug not in self.keys and ref.on_arxiv:
                self._key(ref.slug)
                return ref.slug
        return None

    def cite(self, slugs: list[str], cmd: str = "citep", pre: str = "") -> str:
        keys = ",".join(self.keys[s] for s in slugs)
        opt = f"[{pre}][]" if pre else ""
        return f"\\{cmd}{opt}{{{keys}}}"

    # text pieces
    def _ref_sentence(self, slug: str, long: bool = False) -> str:
        if slug == IIR_BOOK["slug"]:
            return (f"Classic treatments of ranked retrieval and evaluation remain the foundation of the "
                    f"retrieval component~\\cite{{{self.keys[slug]}}}.")
        ref = self.b.refs[slug]
        k = self.keys[slug]
        templates = [
            f"\\citet{{{k}}} {ref.contribution}.",
            f"Prior work proposed to {ref.contribution}~\\citep{{{k}}}.",
            f"A related approach is to {ref.contribution}~\\cite{{{k}}}.",
            f"\\citet{{{k}}} were among the first to {ref.contribution}.",
            f"Building on this idea, \\citet{{{k}}} {ref.contribution}.",
        ]
        sentence = self.rng.choice(templates)
        if long:
            theme = self.theme
            sentence += " " + self.rng.choice(theme.details)
            sentence += f" Their experiments on {theme.datasets} report {self.rng.choice(theme.results)}."
            sentence += " " + self.rng.choice(theme.limitations)
        return sentence

    def related_paragraphs(self, long: bool = False) -> list[tuple[str, str]]:
        """(heading, paragraph) per reference group, in group order."""
        cited = [s for s in self.spec.cites]
        by_group: dict[int, list[str]] = {}
        for slug in cited:
            group = 0 if slug == IIR_BOOK["slug"] else self.b.refs[slug].group
            by_group.setdefault(group, []).append(slug)
        paragraphs = []
        for group in sorted(by_group):
            slugs = by_group[group]
            heading, opening, shared = self.theme.groups[group]
            sentences = [opening]
            for slug in slugs:
                sentences.append(self._ref_sentence(slug, long=long))
            real = [s for s in slugs if s != IIR_BOOK["slug"]]
            if len(real) >= 2:
                sentences.append(f"These methods share the goal to {shared} {self.cite(real[:3])}.")
            sentences.append(f"In contrast to these approaches, {self.spec.contrast}.")
            if long:
                sentences.append(
                    f"Taken together, work on {heading.lower()} shows how much the design of each component "
                    f"matters for {self.theme.name}, and it motivates evaluating components jointly rather "
                    f"than in isolation, which is the perspective we adopt in this paper.")
            paragraphs.append((heading, " ".join(sentences)))
        return paragraphs

    def related_body(self) -> str:
        """The section body; built once because its wording draws from the paper's RNG."""
        if self._related is None:
            self._related = self._build_related_body()
        return self._related

    def _build_related_body(self) -> str:
        long = self.spec.layout == "long"
        parts = []
        paragraphs = self.related_paragraphs(long=long)
        for i, (heading, text) in enumerate(paragraphs):
            if i == 0 and self.spec.layout in ("section_table", "input_file"):
                parts.append(f"\\paragraph{{{heading}.}}\n{_wrap(text)}")
            else:
                parts.append(f"\\paragraph{{{heading}.}}\n{_wrap(text)}" if self.rng.random() < 0.5
                             else _wrap(text))
            if i == 0 and self._comment_only_slug:
                parts.append(f"% TODO: also discuss \\cite{{{self.keys[self._comment_only_slug]}}} "
                             "once the camera-ready version is out.")
            if i == 0 and self.spec.layout == "section_table":
                parts.append(self._table())
                parts.append(f"Table~\\ref{{tab:related}} summarises the closest methods; "
                             f"surveys of the area discuss them in more depth "
                             f"{self.cite(self.spec.cites[:2], pre='see')}.")
        if long:
            extra = []
            for slug in self.spec.cites:
                ref = self.b.refs[slug]
                extra.append(f"Revisiting {ref.title.lower()} from this unified perspective, the component "
                             f"studied by \\citet{{{self.keys[slug]}}} can be seen as one stage of a single "
                             f"grounded question answering model.")
            parts.append("\\paragraph{Discussion.}\n" + _wrap(" ".join(extra)))
        return "\n\n".join(parts)

    def _table(self) -> str:
        rows = []
        for slug in self.spec.cites[4:8]:
            ref = self.b.refs[slug]
            words = ref.title.split(":")[0].split()[:4]
            while words and words[-1].lower() in {"with", "for", "of", "by", "in", "to", "and", "the"}:
                words.pop()
            short = " ".join(words)
            adaptive = "\\checkmark" if ref.group == 1 else "--"
            rows.append(f"{short}~\\cite{{{self.keys[slug]}}} & {adaptive} & -- \\\\")
        rows.append(f"{self.spec.method} (ours) & \\checkmark & \\checkmark \\\\")
        return ("\\begin{table}[t]\n\\centering\n\\small\n\\begin{tabular}{lcc}\n\\toprule\n"
                "Method & Adaptive retrieval & Abstention \\\\\n\\midrule\n" + "\n".join(rows) +
                "\n\\bottomrule\n\\end{tabular}\n"
                "\\caption{Comparison with closely related retrieval-augmented generation methods.}\n"
                "\\label{tab:related}\n\\end{table}")

    def intro(self) -> str:
        theme = self.theme
        text = f"{theme.contexts[0]} {self.spec.abstract[0]}"
        if self.spec.intro_cites:
            text += f" Recent work has shown the importance of this problem {self.cite(self.spec.intro_cites)}."
        text += f" {self.spec.abstract[1]} Our contributions are a new method, {self.spec.method}, " \
                f"an analysis of when it helps, and experiments on {theme.datasets}."
        return _wrap(_tex(text))

    def method_and_experiments(self) -> str:
        theme = self.theme
        method = (f"\\section{{Method}}\n\\label{{sec:method}}\n{_wrap(self.spec.abstract[2] if len(self.spec.abstract) > 2 else self.spec.abstract[1])}"
                  f"\n\nLet $x$ denote the input and $y$ the output. {self.spec.method} learns a scoring "
                  f"function $s_\\theta(x, y)$ and is trained with a cross-entropy objective.\n"
                  "\\begin{equation}\n\\mathcal{L}(\\theta) = -\\sum_{(x, y)} \\log p_\\theta(y \\mid x)\n"
                  "\\end{equation}\n")
        experiments = (f"\\section{{Experiments}}\n\\label{{sec:experiments}}\nWe evaluate on {theme.datasets}. "
                       f"{_wrap(_tex(self.spec.abstract[-1]))}\n")
        conclusion = (f"\\section{{Conclusion}}\nWe presented {self.spec.method}. "
                      f"Future work will extend it to other settings of {theme.name}.\n")
        return "\n".join([method, experiments, conclusion])

    def main_tex(self) -> str:
        spec = self.spec
        authors = " \\and ".join(self.b._authors_for(spec.num))
        head = ("\\documentclass[11pt]{article}\n\\usepackage[utf8]{inputenc}\n\\usepackage[numbers]{natbib}\n"
                "\\usepackage{amsmath,amssymb}\n\\usepackage{booktabs}\n\\usepackage{hyperref}\n\n"
                f"\\title{{{spec.title}}}\n\\author{{{authors}}}\n\\date{{}}\n\n\\begin{{document}}\n\\maketitle\n\n"
                f"\\begin{{abstract}}\n{_wrap(_tex(' '.join(spec.abstract)))}\n\\end{{abstract}}\n\n"
                f"\\section{{Introduction}}\n\\label{{sec:intro}}\n{self.intro()}\n\n")
        layout = spec.layout
        if layout == "none":
            related = ("% \\section{Related Work}\n% Moved to the appendix of the journal version.\n\n"
                       "\\section{Problem Setting}\nWe consider logged feedback collected under a previous "
                       f"policy {self.cite(spec.cites[:2])} and follow the standard protocol of earlier "
                       f"work {self.cite(spec.cites[2:])}.\n\n")
        elif layout == "input_file":
            related = "\\input{tex/related}\n\n"
        elif layout == "background_and_related":
            related = ("\\section{Background and Related Work}\n\\label{sec:background}\n"
                       f"{self.related_body()}\n\n")
        elif layout == "background_subsection":
            related = ("\\section{Background}\n\\label{sec:background}\n\\subsection{Problem Setting}\n"
                       "A question $q$ is answered by a generator that may call a retriever at any decoding "
                       "step; the answer is a sequence of statements, each attributed to retrieved passages.\n\n"
                       f"\\subsection{{Related Work}}\n\\label{{sec:related}}\n{self.related_body()}\n\n")
        elif layout == "section_star":
            related = f"\\section*{{Related Work}}\n{self.related_body()}\n\n"
        elif layout == "section_lower":
            related = f"\\section{{Related work}}\n\\label{{sec:related}}\n{self.related_body()}\n\n"
        else:  # section, section_table, long
            related = f"\\section{{Related Work}}\n\\label{{sec:related}}\n{self.related_body()}\n\n"
        if spec.bib == "inline":
            tail = f"{self.thebibliography()}\n\\end{{document}}\n"
        else:
            tail = "\\bibliographystyle{plainnat}\n\\bibliography{" + \
                   ("main" if spec.bib == "bbl" else "references") + "}\n\n\\end{document}\n"
        return head + related + self.method_and_experiments() + "\n" + tail

    def related_tex_file(self) -> str:
        return ("% Related work, included from main.tex\n\\section{Related Work}\n\\label{sec:related}\n"
                f"{self.related_body()}\n")

    # bibliography
    def _style_for(self, slug: str, i: int) -> str:
        if slug == IIR_BOOK["slug"]:
            return "book"
        ref = self.b.refs[slug]
        if not ref.on_arxiv:
            # One non-arXiv reference per paper is cited by title only (found through OpenAlex).
            return "title_only" if i % 5 == 4 else "journal_doi"
        if ref.arxiv_doi_field and i % 2 == 0:
            return "venue_doi"
        return ARXIV_BIB_STYLES[(i + self.spec.num) % len(ARXIV_BIB_STYLES)]

    def bib_entries(self) -> list[tuple[str, str, str, str]]:
        """(slug, key, style, bibtex) for every entry, including uncited ones, in a stable order."""
        out = []
        slugs = list(self.keys)
        if self.spec.num == 14:  # too few references: the bibliography holds what is cited
            slugs = [s for s in slugs if s in self.spec.cites]
        for i, slug in enumerate(slugs):
            style = self._style_for(slug, i)
            self.bib_styles[slug] = style
            out.append((slug, self.keys[slug], style, self._bibtex(slug, style)))
        return out

    def _bib_authors(self, names: list[str]) -> str:
        if self.spec.num % 2:
            return " and ".join(_latex_name(n) for n in names)
        return " and ".join(f"{_latex_name(n.split()[-1])}, {_latex_name(' '.join(n.split()[:-1]))}"
                            for n in names)

    def _bibtex(self, slug: str, style: str) -> str:
        key = self.keys[slug]
        if style == "book":
            b = IIR_BOOK
            return (f"@book{{{key},\n  title = {{{b['title']}}},\n  author = {{{self._bib_authors(b['authors'])}}},\n"
                    f"  publisher = {{Cambridge University Press}},\n  year = {{{b['year']}}}\n}}\n")
        ref = self.b.refs[slug]
        title = _protect(ref.title)
        authors = self._bib_authors(ref.authors)
        year = ref.published.year
        version = f"v{ref.versions}" if ref.versions > 1 and style == "eprint" else ""
        common = f"  title = {{{title}}},\n  author = {{{authors}}},\n  year = {{{year}}}"
        if style == "eprint":
            return (f"@article{{{key},\n{common},\n  eprint = {{{ref.arxiv_id}{version}}},\n"
                    f"  archivePrefix = {{arXiv}},\n  primaryClass = {{{ref.primary_category}}}\n}}\n")
        if style == "url":
            return f"@misc{{{key},\n{common},\n  url = {{https://arxiv.org/abs/{ref.arxiv_id}}}\n}}\n"
        if style == "arxiv_doi":
            return (f"@misc{{{key},\n{common},\n  doi = {{10.48550/arXiv.{ref.arxiv_id}}},\n"
                    f"  publisher = {{arXiv}}\n}}\n")
        if style == "journal_arxiv":
            return f"@article{{{key},\n{common},\n  journal = {{arXiv preprint arXiv:{ref.arxiv_id}}}\n}}\n"
        if style == "venue_doi":
            return (f"@inproceedings{{{key},\n{common},\n  booktitle = {{Proceedings of {ref.venue} {year}}},\n"
                    f"  pages = {{1--12}},\n  doi = {{{ref.doi}}}\n}}\n")
        if style == "journal_doi":
            return (f"@article{{{key},\n{common},\n  journal = {{{ref.venue}}},\n  volume = {{{year - 1990}}},\n"
                    f"  number = {{{1 + len(ref.slug) % 6}}},\n  pages = {{101--118}},\n  doi = {{{ref.doi}}}\n}}\n")
        # title_only: no identifier at all; the resolver must search by title.
        booktitle = "Advances in Neural Information Processing Systems" if ref.on_arxiv else ref.venue
        return f"@inproceedings{{{key},\n{common},\n  booktitle = {{{booktitle}}}\n}}\n"

    def bib_file(self) -> str:
        header = f"% Bibliography of \"{self.spec.title}\"\n\n"
        return header + "\n".join(text for _, _, _, text in self.bib_entries())

    def _bibitem_text(self, slug: str, style: str) -> str:
        if style == "book":
            b = IIR_BOOK
            return f"{_join_names(b['authors'])}.\n\\newblock \\emph{{{b['title']}}}.\n\\newblock Cambridge University Press, {b['year']}."
        ref = self.b.refs[slug]
        names = _latex_name(_join_names(ref.authors))
        year = ref.published.year
        if style in ("eprint", "journal_arxiv"):
            where = f"\\emph{{arXiv preprint arXiv:{ref.arxiv_id}}}, {year}"
        elif style == "url":
            where = f"{year}.\n\\newblock URL \\url{{https://arxiv.org/abs/{ref.arxiv_id}}}"
        elif style == "arxiv_doi":
            where = f"{year}.\n\\newblock \\doi{{10.48550/arXiv.{ref.arxiv_id}}}"
        elif style == "venue_doi":
            where = f"In \\emph{{Proceedings of {ref.venue} {year}}}, pages 1--12, {year}.\n\\newblock \\doi{{{ref.doi}}}"
        elif style == "journal_doi":
            where = f"\\emph{{{ref.venue}}}, {year - 1990}:\\penalty0 101--118, {year}.\n\\newblock \\doi{{{ref.doi}}}"
        else:
            where = f"In \\emph{{{'Advances in Neural Information Processing Systems' if ref.on_arxiv else ref.venue}}}, {year}"
        return f"{names}.\n\\newblock {ref.title}.\n\\newblock {where}."

    def thebibliography(self) -> str:
        items = []
        for slug, key, style, _ in self.bib_entries():
            if slug == IIR_BOOK["slug"]:
                label = "Manning et~al.(2008)"
            else:
                ref = self.b.refs[slug]
                label = f"{_ascii(ref.authors[0].split()[-1])} et~al.({ref.published.year})"
            items.append(f"\\bibitem[{label}]{{{key}}}\n{self._bibitem_text(slug, style)}")
        return ("\\begin{thebibliography}{" + str(len(items)) + "}\n"
                "\\providecommand{\\natexlab}[1]{#1}\n\\providecommand{\\url}[1]{\\texttt{#1}}\n"
                "\\providecommand{\\doi}[1]{doi: #1}\n\n" + "\n\n".join(items) + "\n\n\\end{thebibliography}\n")

    def expected_references(self) -> dict[str, dict]:
        out = {}
        for slug in self.spec.cites:
            key = self.keys[slug]
            style = self.bib_styles.get(slug, "")
            if slug == IIR_BOOK["slug"]:
                out[key] = {"bib_style": "book", "arxiv_id": None, "doi": None, "openalex_id": None,
                            "title": IIR_BOOK["title"], "resolvable_by": "unresolvable"}
                continue
            ref = self.b.refs[slug]
            if not ref.on_arxiv:
                how = "openalex_doi" if style == "journal_doi" else "openalex_title"
            elif style == "title_only":
                how = "arxiv_title"
            elif style == "venue_doi":
                how = "openalex_doi"
            else:
                how = "arxiv_id"
            out[key] = {"bib_style": style, "arxiv_id": ref.arxiv_id, "doi": ref.doi.lower(),
                        "openalex_id": ref.openalex_id, "title": ref.title, "resolvable_by": how,
                        "cited_by_count": ref.cited_by_count}
        return out

    def files(self) -> dict[str, bytes]:
        """The LaTeX project, path -> bytes."""
        spec = self.spec
        files = {"main.tex": self.main_tex().encode("utf-8")}
        if spec.layout == "input_file":
            files["tex/related.tex"] = self.related_tex_file().encode("utf-8")
        if spec.bib == "bib":
            files["references.bib"] = self.bib_file().encode("utf-8")
        elif spec.bib == "bbl":
            files["main.bbl"] = self.thebibliography().encode("utf-8")
        if spec.bib != "inline":
            files["figures/README.txt"] = b"Figures are omitted from the demo snapshot.\n"
        return files

    def related_file(self) -> str:
        return "tex/related.tex" if self.spec.layout == "input_file" else "main.tex"

    def section_title(self) -> str | None:
        return {"none": None, "background_and_related": "Background and Related Work",
                "section_lower": "Related work"}.get(self.spec.layout, "Related Work")

    def section_level(self) -> str | None:
        if self.spec.layout == "none":
            return None
        return "subsection" if self.spec.layout == "background_subsection" else "section"


def _tex(text: str) -> str:
    """Escape the characters of plain prose that LaTeX treats specially (31% would start a comment)."""
    return re.sub(r"(?<!\\)([%&#])", r"\\\1", text)


def _ascii(text: str) -> str:
    return "".join(ch for ch in unicodedata.normalize("NFKD", text.replace("Ł", "L").replace("ø", "o"))
                   if not unicodedata.combining(ch))


def _join_names(names: list[str]) -> str:
    if len(names) <= 2:
        return " and ".join(names)
    return ", ".join(names[:-1]) + ", and " + names[-1]


def _protect(title: str) -> str:
    """Brace acronyms the way .bib files protect their case."""
    return re.sub(r"\b([A-Z]{2,}[A-Za-z-]*)\b", r"{\1}", title)


def _wrap(text: str, width: int = 100) -> str:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return "\n".join(lines)


def plain_word_count(latex: str) -> int:
    """A rough count of the words a reader sees: comments, floats, citations and commands removed."""
    text = re.sub(r"(?<!\\)%.*", "", latex)
    text = re.sub(r"\\begin\{table\*?\}.*?\\end\{table\*?\}", " ", text, flags=re.S)
    text = re.sub(r"\\(?:cite[pt]?|ref|label)(?:\[[^\]]*\])*\{[^}]*\}", " ", text)
    text = re.sub(r"\\(?:sub)*section\*?\{[^}]*\}|\\paragraph\{[^}]*\}", " ", text)
    text = re.sub(r"\\[A-Za-z]+\*?", " ", text)
    text = re.sub(r"[{}~$\\]", " ", text)
    return len([w for w in text.split() if re.search(r"[A-Za-z0-9]", w)])

