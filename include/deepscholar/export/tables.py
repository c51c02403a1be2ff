"""What the published data holds: one declaration per file, its columns with a one-line meaning each, and the
SQL that reads it. The writer refuses a frame whose columns differ from the declaration, so the datacard
(README.md) can never describe columns a file does not have.

Parameters of every query: `:r` the release, `:judges` the judge configs exported.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Column", "Table", "TABLES", "TEXT_COLUMNS", "UNTRUSTED_COLUMNS", "WITHHELD_QUERY_COLUMNS"]


@dataclass(frozen=True)
class Column:
    name: str
    meaning: str


@dataclass(frozen=True)
class Table:
    name: str  # the file name without extension
    meaning: str
    sql: str | None  # None: built in Python (metrics, from the registry)
    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]


def _cols(*pairs: tuple[str, str]) -> tuple[Column, ...]:
    return tuple(Column(n, m) for n, m in pairs)


# Text columns whose values can look like numbers (arXiv ids such as 2506.01010, years, keys): a CSV reader must
# be told they are text, or 2506.01010 becomes the float 2506.0101 (the datacard says how).
TEXT_COLUMNS = ("arxiv_id", "resolved_arxiv_id", "cite_key", "bib_year", "item_key", "openalex_id",
                "metric_version", "runner_up", "system_id")
# Columns holding text a third party wrote, as it wrote it: systems (their reports, errors and what they say
# of their sources, imported from outside systems too), the papers' authors (titles, abstracts, sections,
# bibliographies), OpenAlex, and LLM judges (whose answers read all of that). Read them as data, never as
# markup or formulas: the CSVs neutralise formula leads (export/writer.py), the Parquet files keep them exact.
UNTRUSTED_COLUMNS: dict[str, tuple[str, ...]] = {
    "queries": ("title", "abstract", "authors", "venue", "section_title", "section_text", "section_raw_latex"),
    "exemplar_references": ("cite_key", "bib_title", "bib_authors", "bib_year", "bib_doi", "resolved_title",
                            "resolved_doi"),
    "nuggets": ("text",),
    "reports": ("error", "text"),
    "report_sources": ("url", "title", "snippet"),
    "judgments": ("label", "unscored_reason", "explanation"),
}
# The exemplar's texts, left empty when the paper's licence does not allow redistribution.
WITHHELD_QUERY_COLUMNS = ("section_text", "section_raw_latex")
_LICENCE = (("license", "the paper's licence URL from arXiv's OAI-PMH record (empty: unknown or never fetched)"),
            ("redistributable", "whether that licence lets the section texts be published (the datacard's rule)"),
            ("text_withheld", "why the section texts are empty (empty: they are published)"))
_IS_CURRENT = ("true: the current row; false: superseded by a later metric version and kept as it was (the board "
               "versions that counted it say so in metric_versions)")
_BOARD_KEY = (("release_id", "the release (month)"), ("judge_config", "the judge that scored the reports"),
              ("board_version", "the board version (the one readers see; see board_versions.csv)"))
_CUTOFF = (("knowledge_cutoff", "the system's model knowledge cutoff when the board was rolled up (empty: unknown or "
                                "no model)"),
           ("contamination", "may_have_seen: the cutoff is on/after the month's first query, so the row is shown "
                             "but not ranked; cutoff_unknown: a model-using system without a known cutoff, ranked "
                             "and marked; empty: neither"))
_METRIC_ROW = (
    ("metric", "metric name (metrics.csv)"), ("dimension", "its dimension"),
    ("metric_position", "its column within the board"), ("variant", "the headline variant the mean is of"),
    ("metric_version", "definition version(s) of the scores averaged"),
    ("mean", "mean of the headline variant over the system's scored ok reports (unscored ones excluded)"),
    ("n", "reports scored"), ("n_unscored", "reports left unscored (judge failures), excluded from the mean"),
    ("ci_low", "bootstrap 95% interval, low"), ("ci_high", "bootstrap 95% interval, high"),
    ("is_best", "best system on this metric"), ("significant", "best by a paired t-test against the runner-up"),
    ("p_value", "that test's p-value"), ("runner_up", "the runner-up system"), ("n_pairs", "queries paired"))

TABLES: tuple[Table, ...] = (
    Table("queries", "one benchmark query per row: the paper, its metadata and its exemplar related-work section",
          """SELECT q.release_id, q.arxiv_id, q.version, q.title, q.abstract, q.authors::text AS authors, q.published,
                    p.primary_category, q.venue, q.section_title, q.section_text, q.section_raw_latex, q.word_count
               FROM release_queries q LEFT JOIN papers p ON p.arxiv_id = q.arxiv_id AND p.version = q.version
              WHERE q.release_id = :r ORDER BY q.arxiv_id""",
          _cols(("release_id", "the release (month)"), ("arxiv_id", "the query paper's arXiv id (no version)"),
                ("version", "its version used"), ("title", "title (arXiv metadata, CC0)"),
                ("abstract", "abstract (arXiv metadata, CC0)"), ("authors", "author names, a JSON list"),
                ("published", "first submission time (UTC)"),
                ("primary_category", "arXiv primary category (empty for imported datasets)"),
                ("venue", "venue the paper names (comment / journal_ref)"),
                ("section_title", "heading of the exemplar related-work section"),
                ("section_text", "the exemplar section as clean text with [@key] citation markers (withheld "
                                 "unless the licence allows it)"),
                ("section_raw_latex", "the same section's LaTeX source (withheld unless the licence allows it)"),
                ("word_count", "words in the section text"), *_LICENCE)),
    Table("exemplar_references", "one reference of an exemplar section per row, as resolved and labelled",
          """SELECT e.release_id, e.arxiv_id, e.cite_key, e.bib_type, e.bib_title, e.bib_authors, e.bib_year, e.bib_doi,
                    e.resolved_arxiv_id, e.openalex_id, e.resolved_title, e.resolved_doi, e.resolution_method,
                    e.cited_by_count, e.is_important
               FROM exemplar_references e WHERE e.release_id = :r ORDER BY e.arxiv_id, e.cite_key""",
          _cols(("release_id", "the release"), ("arxiv_id", "the query paper"),
                ("cite_key", "the key the section cites it by ([@key])"), ("bib_type", "bibliography entry type"),
                ("bib_title", "title in the bibliography"), ("bib_authors", "authors in the bibliography"),
                ("bib_year", "year in the bibliography"), ("bib_doi", "DOI in the bibliography"),
                ("resolved_arxiv_id", "the arXiv paper it resolved to"), ("openalex_id", "the OpenAlex work"),
                ("resolved_title", "title of what it resolved to"), ("resolved_doi", "DOI of what it resolved to"),
                ("resolution_method", "how it was resolved (or unresolved)"),
                ("cited_by_count", "OpenAlex cited-by count, frozen for the release"),
                ("is_important", "release-time judge: an important reference"))),
    Table("nuggets", "one nugget (atomic fact) of an exemplar section per row",
          """SELECT n.release_id, n.arxiv_id, n.nugget_idx, n.text, n.importance, n.judge_config
               FROM nuggets n WHERE n.release_id = :r ORDER BY n.arxiv_id, n.nugget_idx""",
          _cols(("release_id", "the release"), ("arxiv_id", "the query paper"), ("nugget_idx", "its position"),
                ("text", "the nugget"), ("importance", "vital or okay"),
                ("judge_config", "the release-time judge that extracted it"))),
    Table("reports", "one report per row: what a system wrote for a query",
          """SELECT r.report_id, r.release_id, r.system_id, s.kind AS system_kind, r.arxiv_id, r.status, r.error,
                    r.text, r.system_build, r.n_citations, r.n_unresolved_citations, r.n_leaked_sources,
                    r.cost_usd, r.latency_ms
               FROM reports r LEFT JOIN systems s USING (system_id)
              WHERE r.release_id = :r ORDER BY r.system_id, r.arxiv_id""",
          _cols(("report_id", "the report's id (joins report_sources, judgments, metric_scores)"),
                ("release_id", "the release"), ("system_id", "the system"), ("system_kind", "its kind"),
                ("arxiv_id", "the query paper"), ("status", "ok, or system_error (never scored)"),
                ("error", "the system's error"), ("text", "the report with [n] citations (the human exemplar's "
                                                          "is the section text: withheld with it)"),
                ("system_build", "the system build that wrote it"), ("n_citations", "citations in the text"),
                ("n_unresolved_citations", "citations naming no source"),
                ("n_leaked_sources", "sources dated on or after the query paper"),
                ("cost_usd", "LLM cost of writing it"), ("latency_ms", "time to write it"),
                ("text_withheld", "why the text is empty (empty: it is published)"))),
    Table("report_sources", "one numbered source of a report per row",
          """SELECT rs.report_id, rs.source_idx, rs.arxiv_id, rs.url, rs.title, rs.snippet, rs.published, rs.leaked,
                    rs.cited
               FROM report_sources rs JOIN reports r USING (report_id)
              WHERE r.release_id = :r ORDER BY rs.report_id, rs.source_idx""",
          _cols(("report_id", "the report"), ("source_idx", "n of its [n] marker"),
                ("arxiv_id", "the source's arXiv id"), ("url", "its URL"), ("title", "its title"),
                ("snippet", "what the system saw of it"), ("published", "its date (UTC)"),
                ("leaked", "dated on or after the query paper"), ("cited", "cited (false: only retrieved)"))),
    Table("judgments", "one judged item per row (a nugget batch, a source, a sentence/citation pair, ...)",
          """SELECT j.report_id, j.metric, j.judge_config, j.item_key, j.metric_version, j.is_current,
                    j.label::text AS label, j.unscored_reason, j.explanation
               FROM judgment_versions j JOIN reports r USING (report_id)
              WHERE r.release_id = :r AND j.judge_config = ANY(:judges)
              ORDER BY j.report_id, j.metric, j.judge_config, j.item_key, j.metric_version""",
          _cols(("report_id", "the report"), ("metric", "the metric"), ("judge_config", "the judge"),
                ("item_key", "the item within the report and metric"), ("metric_version", "definition version"),
                ("is_current", _IS_CURRENT),
                ("label", "the judge's label, JSON"), ("unscored_reason", "why the item has no label"),
                ("explanation", "the judge's explanation"))),
    Table("metric_scores", "one score per row: a variant of a metric for one report under one judge",
          """SELECT m.report_id, r.system_id, r.arxiv_id, r.status AS report_status, m.metric, m.judge_config, m.variant,
                    m.metric_version, m.is_current, m.value, m.unscored_reason, m.n_items
               FROM metric_score_versions m JOIN reports r USING (report_id)
              WHERE r.release_id = :r AND m.judge_config = ANY(:judges)
              ORDER BY m.report_id, m.metric, m.judge_config, m.variant, m.metric_version""",
          _cols(("report_id", "the report"), ("system_id", "its system"), ("arxiv_id", "its query paper"),
                ("report_status", "the report's status (boards average ok reports only)"),
                ("metric", "the metric (metrics.csv)"), ("judge_config", "the judge"),
                ("variant", "the variant (metrics.csv names the headline one)"),
                ("metric_version", "definition version"), ("is_current", _IS_CURRENT),
                ("value", "the score (empty: unscored)"),
                ("unscored_reason", "why it is unscored"), ("n_items", "items judged"))),
    Table("metrics", "every registered metric (from the metric registry), with what the boards read of it",
          None,
          _cols(("metric", "metric name"), ("family", "core, or the track it belongs to"),
                ("dimension", "its dimension"), ("position", "its order on the boards"), ("label", "its heading"),
                ("headline_variant", "the variant the boards average"),
                ("variants", "every variant it scores, comma-separated"),
                ("bounded", "scores lie in [0, 1] (false: a count)"),
                ("in_geometric_mean", "one of the core means whose geometric mean ranks the core board"),
                ("ranks_track", "the track whose board ranks by this metric (empty: none)"))),
    Table("leaderboard_systems", "the core board: one system per row, ranked by the geometric mean of its metric means",
          """SELECT l.release_id, l.judge_config, l.board_version, l.system_id, l.n_queries, l.n_reports, l.n_failed,
                    l.geometric_mean, l.geometric_mean_ci_low, l.geometric_mean_ci_high, l.rank,
                    l.knowledge_cutoff, l.contamination
               FROM leaderboard_systems l JOIN board_current c USING (release_id, judge_config, board_version)
              WHERE l.release_id = :r AND l.judge_config = ANY(:judges)
              ORDER BY l.judge_config, l.rank, l.system_id""",
          _cols(*_BOARD_KEY, ("system_id", "the system"), ("n_queries", "queries of the release"),
                ("n_reports", "ok reports"), ("n_failed", "system_error reports"),
                ("geometric_mean", "geometric mean of the core metrics' means"),
                ("geometric_mean_ci_low", "bootstrap 95% interval, low"),
                ("geometric_mean_ci_high", "bootstrap 95% interval, high"),
                ("rank", "rank by the geometric mean (ties share the better rank; empty: not ranked, see "
                         "contamination)"), *_CUTOFF)),
    Table("leaderboard_metrics", "the core board's metric means: one (system, metric) per row",
          """SELECT l.release_id, l.judge_config, l.board_version, l.system_id, l.metric, l.dimension, l.metric_position,
                    l.variant, l.metric_version, l.mean, l.n, l.n_unscored, l.ci_low, l.ci_high, l.is_best,
                    l.significant, l.p_value, l.runner_up, l.n_pairs
               FROM leaderboard_metrics l JOIN board_current c USING (release_id, judge_config, board_version)
              WHERE l.release_id = :r AND l.judge_config = ANY(:judges)
              ORDER BY l.judge_config, l.system_id, l.metric_position""",
          _cols(*_BOARD_KEY, ("system_id", "the system"), *_METRIC_ROW)),
    Table("track_boards", "every track's board: one (track, system) per row, ranked by the track's ranking metric",
          """SELECT t.release_id, t.judge_config, t.board_version, t.family, t.system_id, t.n_queries, t.n_reports,
                    t.n_failed, t.ranking_metric, t.rank, t.knowledge_cutoff, t.contamination
               FROM track_boards t JOIN board_current c USING (release_id, judge_config, board_version)
              WHERE t.release_id = :r AND t.judge_config = ANY(:judges)
              ORDER BY t.judge_config, t.family, t.rank, t.system_id""",
          _cols(*_BOARD_KEY, ("family", "the track"), ("system_id", "the system"),
                ("n_queries", "queries of the release"), ("n_reports", "ok reports"),
                ("n_failed", "system_error reports"), ("ranking_metric", "the metric the track ranks by"),
                ("rank", "rank by that metric's mean (ties share the better rank; empty: not ranked, see "
                         "contamination)"), *_CUTOFF)),
    Table("track_board_metrics", "the tracks' metric means: one (track, system, metric) per row",
          """SELECT t.release_id, t.judge_config, t.board_version, t.family, t.system_id, t.metric, t.dimension,
                    t.metric_position, t.variant, t.metric_version, t.mean, t.n, t.n_unscored, t.ci_low, t.ci_high,
                    t.is_best, t.significant, t.p_value, t.runner_up, t.n_pairs
               FROM track_board_metrics t JOIN board_current c USING (release_id, judge_config, board_version)
              WHERE t.release_id = :r AND t.judge_config = ANY(:judges)
              ORDER BY t.judge_config, t.family, t.system_id, t.metric_position""",
          _cols(*_BOARD_KEY, ("family", "the track"), ("system_id", "the system"), *_METRIC_ROW)),
    Table("board_agreement", "Kendall's tau-b between two families' rankings, one pair per row",
          """SELECT a.release_id, a.judge_config, a.board_version, a.family_a, a.family_b, a.n_systems, a.kendall_tau,
                    a.p_value, a.movers::text AS movers
               FROM board_agreement a JOIN board_current c USING (release_id, judge_config, board_version)
              WHERE a.release_id = :r AND a.judge_config = ANY(:judges)
              ORDER BY a.judge_config, a.family_a, a.family_b""",
          _cols(*_BOARD_KEY, ("family_a", "board A"), ("family_b", "board B"),
                ("n_systems", "systems on both"), ("kendall_tau", "Kendall's tau-b of the two rankings"),
                ("p_value", "its p-value"), ("movers", "the biggest rank moves from A to B, JSON"))),
    Table("published_figures", "each track's figures as its authors' released scorer aggregates them, kept with "
          "the board version (not our board's numbers: docs/METRICS.md, Conformance); one figure per row",
          """SELECT f.release_id, f.judge_config, f.board_version, f.family, f.system_id, f.figure, f.value,
                    array_to_string(f.metric_versions, ', ') AS metric_versions
               FROM board_published_figures f JOIN board_current c USING (release_id, judge_config, board_version)
              WHERE f.release_id = :r AND f.judge_config = ANY(:judges)
              ORDER BY f.judge_config, f.family, f.system_id, f.figure""",
          _cols(*_BOARD_KEY, ("family", "the track"), ("system_id", "the system"),
                ("figure", "the figure's name (e.g. citation_accuracy_pooled: supported / judged pairs pooled over "
                           "the reports that cite anything)"),
                ("value", "its value (empty: nothing to aggregate)"),
                ("metric_versions", "'metric version' of the scores it was computed from"))),
    Table("board_versions", "every version of the release's boards with its provenance (the exported one marked)",
          """SELECT v.release_id, v.judge_config, v.board_version, v.status,
                    v.board_version = c.board_version AS is_exported, v.manifest_hash, v.judge::text AS judge,
                    v.metric_versions::text AS metric_versions, v.system_builds::text AS system_builds, v.n_systems,
                    v.changes, v.created_at, v.published_at
               FROM board_versions v JOIN board_current c USING (release_id, judge_config)
              WHERE v.release_id = :r AND v.judge_config = ANY(:judges)
              ORDER BY v.judge_config, v.board_version""",
          _cols(*_BOARD_KEY, ("status", "draft or published (a published version never changes)"),
                ("is_exported", "the version readers see, the one in the board files"),
                ("manifest_hash", "the release's manifest hash it was computed from"),
                ("judge", "the judge's settings, JSON"), ("metric_versions", "metric definition versions, JSON"),
                ("system_builds", "every system's builds, JSON"), ("n_systems", "systems on the core board"),
                ("changes", "how it differs from the version before"), ("created_at", "when it was created"),
                ("published_at", "when it was published"))),
    Table("judge_configs", "the judges exported: kind, model and parameters",
          """SELECT j.judge_config, j.kind, j.model, j.metric_models::text AS metric_models, j.params::text AS params,
                    j.metric_versions::text AS metric_versions
               FROM judge_configs j WHERE j.judge_config = ANY(:judges) ORDER BY j.judge_config""",
          _cols(("judge_config", "the judge's name"), ("kind", "local or llm"), ("model", "its model"),
                ("metric_models", "per-metric models, JSON"), ("params", "its parameters, JSON"),
                ("metric_versions", "metric versions it judged with, JSON"))),
)
