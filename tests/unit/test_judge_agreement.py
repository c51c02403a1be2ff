"""Judge-validation statistics on hand-made label sets whose values are worked out by hand below."""

from __future__ import annotations

import pytest

from deepscholar.evaluation.judge_validation.rater_agreement import (
    alpha_ci,
    cohen_kappa,
    confusion,
    kappa_ci,
    kendall_tau,
    krippendorff_alpha,
    label_order,
    majority_labels,
    pairwise_agreement,
    pairwise_ci,
    percent_agreement,
    percent_ci,
)

# The textbook 2x2 example: 50 items, rater A (rows) against rater B (columns)
#              B yes  B no
#   A yes        20     5     A says yes 25 times (p = .5)
#   A no         10    15     B says yes 30 times (p = .6)
# p_o = (20 + 15) / 50 = .70;  p_e = .5 * .6 + .5 * .4 = .50;  kappa = (.70 - .50) / (1 - .50) = .40
A = ["yes"] * 20 + ["yes"] * 5 + ["no"] * 10 + ["no"] * 15
B = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15


def test_textbook_two_by_two():
    assert percent_agreement(A, B) == pytest.approx(0.70)
    assert cohen_kappa(A, B, ["yes", "no"]) == pytest.approx(0.40)
    assert confusion(A, B, ["yes", "no"]) == {"yes": {"yes": 20, "no": 5}, "no": {"yes": 10, "no": 15}}


def test_an_allowed_label_nobody_used_keeps_kappa_and_shows_as_zeros():
    # An unused label adds 0 to both the observed and the chance agreement: kappa stays .40.
    assert cohen_kappa(A, B, ["yes", "no", "maybe"]) == pytest.approx(0.40)
    table = confusion(A, B, ["yes", "no", "maybe"])
    assert table["maybe"] == {"yes": 0, "no": 0, "maybe": 0} and table["yes"]["maybe"] == 0


def test_three_labels_by_hand():
    # judge:  2 2 1 0 0 1      human: 2 1 1 0 2 1
    # agree on items 1, 3, 4, 6: p_o = 4/6.  judge marginals 2: 2/6, 1: 2/6, 0: 2/6; human 2: 2/6, 1: 3/6, 0: 1/6
    # p_e = (2*2 + 2*3 + 2*1) / 36 = 12/36 = 1/3;  kappa = (2/3 - 1/3) / (2/3) = .5
    judge, human = ["2", "2", "1", "0", "0", "1"], ["2", "1", "1", "0", "2", "1"]
    assert percent_agreement(judge, human) == pytest.approx(4 / 6)
    assert cohen_kappa(judge, human, ["2", "1", "0"]) == pytest.approx(0.5)
    assert confusion(judge, human, ["2", "1", "0"]) == {
        "2": {"2": 1, "1": 1, "0": 0}, "1": {"2": 0, "1": 2, "0": 0}, "0": {"2": 1, "1": 0, "0": 1}}


def test_krippendorff_alpha_two_annotators_by_hand():
    # items:  1 2 3 4        coincidences: aa 4, bb 2, ab 1, ba 1;  n_a = 5, n_b = 3, n = 8
    #   A:    a a b b        D_o = 2/8;  D_e = 2 * 5 * 3 / (8 * 7) = 30/56
    #   B:    a a b a        alpha = 1 - (2/8) / (30/56) = 1 - 7/15 = 8/15
    assert krippendorff_alpha([["a", "a", "b", "b"], ["a", "a", "b", "a"]], ["a", "b"]) == pytest.approx(8 / 15)


def test_krippendorff_alpha_with_missing_labels_by_hand():
    # items:  1 2 3 4 5      item 2 (a a a, m = 3): aa += 6 pairs / 2 = 3; item 4 (b a b): ab 1, ba 1, bb 1
    #   A:    a a b b a      item 5 has one label: not pairable, left out
    #   B:    a a b a -      coincidences: aa 5, bb 3, ab 1, ba 1; n_a = 6, n_b = 4, n = 10
    #   C:    - a - b -      D_o = 2/10, D_e = 2 * 6 * 4 / (10 * 9) = 48/90; alpha = 1 - .2 / (48/90) = .625
    table = [["a", "a", "b", "b", "a"], ["a", "a", "b", "a", None], [None, "a", None, "b", None]]
    assert krippendorff_alpha(table, ["a", "b"]) == pytest.approx(0.625)
    # pairs per item: 1/1, 3/3, 1/1, 1/3 agreeing, item 5 none: 6 of 8
    assert pairwise_agreement(table) == pytest.approx(0.75)
    low, high = pairwise_ci(table, seed=1)
    assert 0 <= low <= 0.75 <= high <= 1
    assert pairwise_ci(table, seed=1) == (low, high)  # seeded: the same interval every time


def test_degenerate_one_label_only():
    same = ["a"] * 5
    assert percent_agreement(same, same) == 1.0
    assert cohen_kappa(same, same, ["a", "b"]) is None  # chance agreement is 1: kappa is 0/0
    assert percent_ci(same, same) == (1.0, 1.0)  # percentile interval: honest, where BCa gives NaN
    assert kappa_ci(same, same, ["a", "b"]) is None  # every resample undefined
    assert krippendorff_alpha([same, same], ["a", "b"]) is None
    assert alpha_ci([same, same], ["a", "b"]) is None
    assert confusion(same, same, ["a", "b"]) == {"a": {"a": 5, "b": 0}, "b": {"a": 0, "b": 0}}


def test_degenerate_no_items():
    assert percent_agreement([], []) is None
    assert cohen_kappa([], [], ["a", "b"]) is None
    assert confusion([], [], ["a", "b"]) == {"a": {"a": 0, "b": 0}, "b": {"a": 0, "b": 0}}
    assert percent_ci([], []) is None and kappa_ci([], [], ["a", "b"]) is None
    assert krippendorff_alpha([[], []], ["a", "b"]) is None and pairwise_agreement([[], []]) is None
    assert percent_ci(["a"], ["b"]) is None  # one item: nothing to resample


def test_unequal_lengths_are_refused():
    with pytest.raises(ValueError, match="same items"):
        percent_agreement(["a"], ["a", "b"])


def test_bootstrap_intervals_are_seeded_and_hold_the_estimate():
    low, high = percent_ci(A, B, seed=7)
    assert low < 0.70 < high and 0.5 < low and high < 0.9
    assert percent_ci(A, B, seed=7) == (low, high)
    k_low, k_high = kappa_ci(A, B, ["yes", "no"], seed=7)
    assert k_low < 0.40 < k_high
    assert kappa_ci(A, B, ["yes", "no"], seed=7) == (k_low, k_high)
    table = [["a", "a", "b", "b", "a", "b"] * 3, ["a", "a", "b", "a", "a", "b"] * 3]
    a_low, a_high = alpha_ci(table, ["a", "b"], seed=3)
    assert a_low <= krippendorff_alpha(table, ["a", "b"]) <= a_high


def test_majority_ties_are_left_out_and_counted():
    found = majority_labels({"i1": ["a", "a"], "i2": ["a", "b"], "i3": ["a", "a", "b"], "i4": [],
                             "i5": ["b", "b", "a", "a"], "i6": ["c"]})
    assert found.labels == {"i1": "a", "i3": "a", "i6": "c"}
    assert found.ties == ("i2", "i5")


def test_label_order_keeps_the_form_order_and_never_drops_a_stray_label():
    assert label_order(["2", "1", "0"], ["1", "x"], ["0"]) == ["2", "1", "0", "x"]


def test_kendall_tau_by_hand():
    # pairs (1,2) and (1,3) keep their order, (2,3) swaps: tau = (2 - 1) / 3
    tau, p = kendall_tau([0.9, 0.5, 0.1], [0.9, 0.1, 0.5])
    assert tau == pytest.approx(1 / 3) and 0 < p <= 1
    assert kendall_tau([0.5, 0.5], [0.1, 0.2]) == (None, None)  # one board ties them all
    assert kendall_tau([0.5], [0.1]) == (None, None)


@pytest.mark.parametrize("n_items, labels, agree, seed", [
    (50, ["yes", "no"], 0.7, 7), (12, ["yes", "no"], 0.95, 1), (80, ["a", "b", "c", "d"], 0.5, 2),
    (6, ["x", "y", "z"], 0.8, 3)])
def test_kappa_interval_is_scikit_learns_kappa_on_each_seeded_resample(n_items, labels, agree, seed):
    """kappa_ci computes its resamples' kappas together; the interval is the one a call of scikit-learn's
    cohen_kappa_score per resample gives (the same draws, undefined resamples left out), a label outside
    `labels` left out of both."""
    import numpy as np

    rng = np.random.default_rng(seed)
    a = list(rng.choice(labels, n_items))
    b = [x if rng.random() < agree else str(rng.choice(labels)) for x in a]
    b[0] = "stray"  # a label neither allowed nor counted
    draws = np.random.default_rng(seed)
    kappas = [cohen_kappa([a[i] for i in idx], [b[i] for i in idx], labels)
              for idx in (draws.integers(0, n_items, n_items) for _ in range(300))]
    defined = [k for k in kappas if k is not None]
    expected = None if len(defined) < 150 else tuple(np.percentile(defined, [2.5, 97.5]))
    found = kappa_ci(a, b, labels, seed=seed, n_resamples=300)
    assert (found is None) == (expected is None)
    if expected is not None:
        assert found == pytest.approx(expected, abs=1e-12)
