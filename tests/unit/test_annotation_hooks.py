"""Every judged metric says how a human answers its question (evaluation/metrics/base.py, AnnotationUnit)."""

from __future__ import annotations

from support.metric_support import report_context, source_doc

from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.metrics.base import JudgeFreeMetric, annotatable
from deepscholar.evaluation.metrics.core.citation_precision import METRIC as CITATION_PRECISION
from deepscholar.evaluation.metrics.core.organization import METRIC as ORGANIZATION
from deepscholar.evaluation.metrics.fact.citation_accuracy import METRIC as CITATION_ACCURACY
from deepscholar.evaluation.metrics.race.base import comparison_label

PAPER_AGREEMENT = {"organization": 0.78, "nugget_coverage": 0.70, "relevance_rate": 0.70,
                   "citation_precision": 0.80, "claim_coverage": 0.80}


def test_every_registered_metric_with_a_judge_is_annotatable_with_distinct_string_labels():
    judged = [m for m in registry.metrics() if not isinstance(m, JudgeFreeMetric)]
    assert {m.name for m in judged} >= set(PAPER_AGREEMENT) | {"race_overall", "claims_f1", "citation_accuracy"}
    for m in judged:
        assert annotatable(m), m.name
        labels = m.annotation_labels
        assert len(labels) >= 2 and all(isinstance(x, str) and x.strip() == x and x for x in labels), m.name
        assert len(set(labels)) == len(labels), m.name
        assert m.annotation_question.strip(), m.name
    for m in registry.metrics():
        if isinstance(m, JudgeFreeMetric):
            assert not annotatable(m), m.name


def test_the_paper_agreement_is_declared_for_its_five_metrics_only():
    declared = {m.name: getattr(m, "paper_human_agreement", None) for m in registry.metrics()}
    assert {k: v for k, v in declared.items() if v is not None} == PAPER_AGREEMENT


def test_a_batch_gives_one_unit_per_sub_item_with_its_own_label_and_none_when_unscored():
    report = report_context(sentences=[("Alpha is fast [1].", [1]), ("Beta is slow [1].", [1]), ("Gamma [2].", [2])],
                            sources={1: "Alpha is fast and beta is slow.", 2: source_doc(2, "")})
    items = {it.key: it for it in CITATION_ACCURACY.items(report)}
    stored = [{"statement": "Beta is slow.", "label": "unsupported"}, {"statement": "Alpha is fast.", "label": "supported"}]
    units = CITATION_ACCURACY.annotation_units(report, items["c1"], stored)
    assert [(u.sub_key, u.content["statement"], u.judge_label) for u in units] == [
        ("1", "Alpha is fast.", "supported"), ("2", "Beta is slow.", "unsupported")]
    assert units[0].content["source"] == "Alpha is fast and beta is slow."
    assert [u.judge_label for u in CITATION_ACCURACY.annotation_units(report, items["c1"], None)] == [None, None]
    # [2] has no text: decided "unknown" without a call, so nothing for a human to check.
    assert CITATION_ACCURACY.annotation_units(report, items["c2"], [{"statement": "Gamma.", "label": "unknown"}]) == []


def test_single_item_metrics_map_their_stored_label_onto_the_annotation_labels():
    report = report_context(sentences=[("Alpha is fast [1].", [1])], sources={1: "Alpha is fast."})
    (item,) = CITATION_PRECISION.items(report)
    assert CITATION_PRECISION.annotation_units(report, item, 1)[0].judge_label == "supported"
    assert CITATION_PRECISION.annotation_units(report, item, 0)[0].judge_label == "not_supported"
    (unit,) = CITATION_PRECISION.annotation_units(report, item, None)
    assert unit.judge_label is None and unit.content == {"sentence": "Alpha is fast.", "source": "Alpha is fast."}
    first, second = ORGANIZATION.items(report)
    a = ORGANIZATION.annotation_units(report, first, {"decision": "B", "winner": "exemplar"})[0]
    b = ORGANIZATION.annotation_units(report, second, {"decision": "B", "winner": "report"})[0]
    assert a.judge_label == b.judge_label == "B"
    assert a.content["section_a"] == b.content["section_b"] and "Alpha is fast" in a.content["section_a"]


def test_race_scores_read_as_the_comparison_a_human_gives():
    assert comparison_label(7.0, 6.0) == comparison_label(6.0, 7.0) == "about_equal"
    assert comparison_label(8.0, 6.5) == "report_better"
    assert comparison_label(2.0, 9.0) == "human_better"


def test_race_units_are_the_criteria_the_metric_counts_with_both_texts():
    from dataclasses import replace

    from support.metric_support import query_info

    from deepscholar.evaluation.metrics.race.query_data import RaceCriterion, RaceDimension
    from deepscholar.evaluation.metrics.race.race_insight import METRIC as INSIGHT
    from deepscholar.evaluation.metrics.race.race_overall import METRIC as OVERALL

    rubric = (RaceDimension("comprehensiveness", 0.4, (RaceCriterion("dense retrieval", "covers DPR", 1.0),)),
              RaceDimension("insight", 0.6, (RaceCriterion("positions the paper", "says how it differs", 1.0),)))
    query = replace(query_info(exemplar_text="Prior work [@a] did X."), family_data={"race": rubric})
    report = report_context(text="We survey retrieval [1].", query=query)
    (item,) = OVERALL.items(report)
    graded = [{**c, "article_1": a, "article_2": b} for c, (a, b) in zip(item.payload, [(8, 4), (3, 3.5)], strict=True)]
    overall = OVERALL.annotation_units(report, item, graded)
    assert [(u.sub_key, u.content["criterion"], u.judge_label) for u in overall] == [
        ("1", "dense retrieval", "report_better"), ("2", "positions the paper", "about_equal")]
    assert overall[0].content["report"] == "We survey retrieval." and "Prior work did X." in overall[0].content[
        "human_section"]
    insight = INSIGHT.annotation_units(report, item, graded)
    assert [(u.sub_key, u.judge_label) for u in insight] == [("2", "about_equal")]
    assert [u.judge_label for u in INSIGHT.annotation_units(report, item, None)] == [None]


def test_claims_units_split_the_work_and_both_connections():
    from dataclasses import replace

    from support.metric_support import exemplar_reference, query_info

    from deepscholar.evaluation.metrics.claims.claims_f1 import METRIC as CLAIMS_F1
    from deepscholar.evaluation.metrics.claims.query_data import GroundTruthClaim

    claim = GroundTruthClaim("dpr", "Dense Passage Retrieval", "2004.04906", None, "we build on its dual encoder")
    query = replace(query_info(exemplar_references=[exemplar_reference("dpr")]), family_data={"claims": (claim,)})
    report = report_context(sentences=[("DPR trains a dual encoder [1].", [1])],
                            sources=[source_doc(1, "snippet", arxiv_id="2004.04906", title="Dense Passage Retrieval")],
                            query=query)
    (item,) = CLAIMS_F1.items(report)
    (unit,) = CLAIMS_F1.annotation_units(report, item, [{"pair": item.payload.texts[0], "label": "2"}])
    assert unit.content == {"work": "Dense Passage Retrieval", "authors_connection": "we build on its dual encoder",
                            "report_connection": "DPR trains a dual encoder."}
    assert unit.judge_label == "2" and CLAIMS_F1.annotation_labels == ("3", "2", "1", "0")


def test_uncited_claims_give_one_unit_per_extracted_claim_with_its_evidence():
    from deepscholar.evaluation.metrics.reportbench.uncited_claim_support import METRIC as UNCITED

    report = report_context(sentences=[("BERT was released by Google in 2018.", []), ("Fine.", [])])
    (item,) = UNCITED.items(report)
    label = {"n_uncited_sentences": 2, "claims": [{
        "sentence": 1, "text": "BERT was released by Google in 2018.", "claim": "BERT was released in 2018.",
        "evidence": [{"arxiv_id": "1810.04805", "title": "BERT", "published": "2018-10-11"}],
        "verdict": "supported", "papers": ["1810.04805"], "reason": "r"}]}
    (unit,) = UNCITED.annotation_units(report, item, label)
    assert unit.sub_key == "1" and unit.judge_label == "supported"
    assert unit.content["evidence"] == "1. BERT (arXiv 1810.04805, 2018-10-11)"
    assert UNCITED.annotation_units(report, item, None) == []
