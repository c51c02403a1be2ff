"""The title rule (text.same_title) that decides a title match between a report's papers and the exemplar's
(evaluation/metrics/papers.py, step 3): hand-made pairs it must take and refuse, the labelled real pairs
it was chosen on (built here from the shared dataset slice, figures held to docs/METRICS.md), the issue's
near-miss case scored through the real metrics, and a property: adding an unrelated paper with an
identifier never raises another entry's match."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from support.metric_support import (
    ScriptedJudge,
    exemplar_reference,
    judge_and_score,
    query_info,
    report_context,
    source_doc,
)
from support.shared_data import require
from support.title_pairs import labelled_pairs

from deepscholar.evaluation import title_evidence
from deepscholar.evaluation.metrics.claims.claims_f1 import METRIC as CLAIMS_F1
from deepscholar.evaluation.metrics.claims.claims_precision import METRIC as CLAIMS_PRECISION
from deepscholar.evaluation.metrics.claims.claims_recall import METRIC as CLAIMS_RECALL
from deepscholar.evaluation.metrics.claims.query_data import GroundTruthClaim
from deepscholar.evaluation.metrics.core.reference_coverage import METRIC as REFERENCE_COVERAGE
from deepscholar.evaluation.metrics.papers import match_papers, resolve_papers
from deepscholar.evaluation.metrics.reportbench.reference_precision import ReferencePrecision
from deepscholar.evaluation.metrics.reportbench.reference_recall import METRIC as REFERENCE_RECALL
from deepscholar.evaluation.metrics.reportbench.reference_recall import ReferenceRecall
from deepscholar.text import title_similarity
from deepscholar.text.titles import same_title

ROOT = Path(__file__).resolve().parents[2]
GAN, CGAN = "Generative Adversarial Nets", "Conditional Generative Adversarial Nets"
DDPM, DDIM = "Denoising Diffusion Probabilistic Models", "Denoising Diffusion Implicit Models"
ADAMW, WD = "Decoupled Weight Decay Regularization", "Weight Decay Regularization"

# Different papers: a word added, dropped or changed, however similar the rest.
NEGATIVES = [
    (CGAN, GAN), (DDIM, DDPM), (ADAMW, WD),
    ("FastSpeech: Fast, Robust and Controllable Text to Speech", "FastSpeech 2: Fast, Robust and Controllable Text to Speech"),
    ("GANs: A Survey of Recent Advances", "Transformers: A Survey of Recent Advances"),
    ("A Survey", "Large Language Models: A Survey"),  # a part too short to name a paper
    ("Language Models are Few-Shot Learners", "Language Models are Unsupervised Multitask Learners"),
    ("SimCSE: Simple Contrastive Learning of Sentence Embeddings",
     "WhitenedCSE: Whitening-based Contrastive Learning of Sentence Embeddings"),
]
# One paper written two ways: hyphenation, braces, accents (LaTeX or not), a web page's additions, a title
# cut short at "..." or at its colon.
POSITIVES = [
    ("BERT: Pre-training of Deep Bidirectional Transformers", "{BERT}: Pretraining of deep bidirectional transformers"),
    (r"Une \'{e}tude fran\c{c}aise des r\'eseaux", "Une étude française des réseaux"),
    (r"Fran\c cais et Gar\c{c}on: a Study of Cedillas", "Français et Garçon: A study of cedillas"),
    ("In-Context Learning with Noisy Labels", "[2411.19581] In-Context Learning with Noisy Labels - arXiv"),
    ("The AI Economist: Improving Equality and Productivity with AI-Driven Tax Policies",
     "[PDF] Improving Equality and Productivity with AI-Driven Tax Policies"),
    ("UniHGKR: Unified Instruction-aware Heterogeneous Knowledge Retrievers",
     "UniHGKR: Unified Instruction-aware Heterogeneous ..."),
    ("Optimal Income Taxation with Unemployment and Wage Responses: A Sufficient Statistics Approach",
     "Optimal Income Taxation with Unemployment and Wage Responses"),
]


@pytest.mark.parametrize(("a", "b"), NEGATIVES)
def test_different_papers_never_have_the_same_title(a, b):
    assert not same_title(a, b) and not same_title(b, a)


@pytest.mark.parametrize(("a", "b"), POSITIVES)
def test_one_paper_written_two_ways_has_the_same_title(a, b):
    assert same_title(a, b) and same_title(b, a)


def test_the_near_misses_pass_the_d2_similarity_bar_which_is_why_d2_matched_them():
    for a, b in NEGATIVES[:3]:
        assert title_similarity(a, b) >= 0.8 and title_evidence.SIMILARITY_D2(a, b)


# --- the labelled real pairs ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def labelled():
    return labelled_pairs(require("deepscholar_official"))


def test_the_labelled_pairs_of_the_dataset_slice_and_its_six_outputs(labelled):
    """Sizes as docs/METRICS.md gives them: every positive is a title as a web page or a search engine writes
    it beside the paper's own; the negatives are every pair of different identifiers of one kind."""
    assert (len(labelled.positives), len(labelled.negatives), labelled.conflicts) == (10, 15451, 0)


def test_the_kept_rule_makes_no_false_match_has_the_best_recall_and_docs_state_its_figures(labelled):
    table = title_evidence.figures(labelled)
    kept = title_evidence.kept_rule(table)
    assert kept.rule == title_evidence.KEPT and kept.false_matches == 0
    assert (kept.true_matches, kept.missed) == (10, 0)
    by_name = {f.rule: f for f in table}
    d2 = by_name["similarity >= 0.80 (d2)"]
    assert (d2.true_matches, d2.false_matches) == (6, 0)  # no false match here either: the hand-made pairs rule it out
    assert max(title_similarity(a, b) for a, b in labelled.negatives) < 0.8  # SimCSE/WhitenedCSE, 0.797
    docs = (ROOT / "docs" / "METRICS.md").read_text(encoding="utf-8")
    for row in title_evidence.markdown_rows(table):
        assert row in docs, f"docs/METRICS.md lacks the measured row {row!r}"
    assert "10 same-paper pairs and 15,451 different-paper pairs" in docs


# --- the issue's case through the real metrics -------------------------------------------------------


def _issue_report():
    """Ground truth GAN (no id) and DDPM (arXiv 2006.11239); the report cites [1] cGAN (arXiv 1411.1784) and
    [2] DDIM (no id)."""
    refs = [exemplar_reference("gan", None, GAN, is_important=True),
            exemplar_reference("ddpm", "2006.11239", DDPM, is_important=True)]
    claims = (GroundTruthClaim("gan", GAN, None, None, "the adversarial framework"),
              GroundTruthClaim("ddpm", DDPM, "2006.11239", None, "the diffusion model"))
    query = replace(query_info(exemplar_text="x", exemplar_references=refs), family_data={"claims": claims})
    sources = [source_doc(1, "s", arxiv_id="1411.1784", title=CGAN), source_doc(2, "s", title=DDIM)]
    sentences = [("The adversarial framework conditions on labels [1].", [1]),
                 ("The diffusion model samples in fewer steps [2].", [2])]
    return report_context(sentences=sentences, sources=sources, query=query)


def test_cgan_and_ddim_against_gan_and_ddpm_score_zero_on_every_matching_metric():
    report = _issue_report()
    judge = ScriptedJudge(AssertionError("nothing matched: no pair to grade"))
    for metric in (CLAIMS_PRECISION, CLAIMS_RECALL, CLAIMS_F1):
        _, scores = judge_and_score(metric, report, judge)
        assert {v: scores[v].value for v in ("score", "all_subclaims", "titles_only")} == dict.fromkeys(
            ("score", "all_subclaims", "titles_only"), 0.0), metric.name
    (recall, *_) = REFERENCE_RECALL.score(report, [])
    (coverage,) = REFERENCE_COVERAGE.score(report, [])
    assert recall.value == 0.0 and recall.details["matched"] == [] and coverage.value == 0.0
    # d2's title step (similarity >= 0.8 where one side lacks the id) matched both: recall and precision 1.0
    assert ReferenceRecall(title_evidence.SIMILARITY_D2).score(report, [])[0].value == 1.0
    assert ReferencePrecision(title_evidence.SIMILARITY_D2).score(report, [])[0].value == 1.0


# --- the property ----------------------------------------------------------------------------------------

POOL = [GAN, CGAN, DDPM, DDIM, ADAMW, WD, *(t for pair in POSITIVES for t in pair)]
IDS = st.sampled_from([None, "2401.00001", "2401.00002", "2401.00003"])


def _matched(sources, refs) -> dict[str, tuple[int, str]]:
    return {m.reference.first.cite_key: (m.source.first.idx, m.by)
            for m in match_papers(resolve_papers(sources, known=refs), resolve_papers(refs, known=sources))}


@settings(max_examples=300, deadline=None, derandomize=True)
@given(refs=st.lists(st.tuples(IDS, st.sampled_from(POOL)), min_size=1, max_size=5),
       sources=st.lists(st.tuples(IDS, st.sampled_from(POOL)), max_size=5), extra_title=st.sampled_from(POOL))
def test_adding_an_unrelated_paper_with_an_identifier_never_raises_another_entrys_match(refs, sources, extra_title):
    """The added paper carries an arXiv id no entry has and a title that is not the same title as any
    reference's (it may be as close as cGAN to GAN): no reference gains or changes its match."""
    assume(not any(same_title(extra_title, title) for _, title in refs))
    ref_entries = [exemplar_reference(f"r{i}", a, t) for i, (a, t) in enumerate(refs)]
    source_entries = [source_doc(i + 1, "s", arxiv_id=a, title=t) for i, (a, t) in enumerate(sources)]
    extra = source_doc(99, "s", arxiv_id="2599.99999", title=extra_title)
    assert _matched([*source_entries, extra], ref_entries) == _matched(source_entries, ref_entries)


def test_the_d2_rule_breaks_that_property_on_the_issues_pair():
    refs = [exemplar_reference("gan", None, GAN)]
    extra = source_doc(99, "s", arxiv_id="1411.1784", title=CGAN)
    papers = resolve_papers([extra]), resolve_papers(refs)
    assert match_papers(*papers) == [] and len(match_papers(*papers, title_evidence.SIMILARITY_D2)) == 1
