import pytest

from deepscholar.sources.venues import DEFAULT_VENUES, VenueMatch, detect_venue

ACCEPTED_COMMENTS = [
    ("Accepted at ICML 2025", "ICML"),
    ("accepted to NeurIPS 2024", "NeurIPS"),
    ("Accepted by NAACL 2025", "NAACL"),
    ("Accepted in TMLR", "TMLR"),
    ("Accepted for publication in Transactions on Machine Learning Research (TMLR)", "TMLR"),
    ("To appear in CVPR 2025", "CVPR"),
    ("To appear at ICLR 2025. 23 pages", "ICLR"),
    ("Published in TMLR (06/2025)", "TMLR"),
    ("Published at KDD 2025", "KDD"),
    ("Published as a conference paper at ICLR 2025", "ICLR"),
    ("Camera-ready version for NeurIPS 2024", "NeurIPS"),
    ("camera ready, SIGIR '25", "SIGIR"),
    ("EMNLP 2025 (Findings)", "EMNLP"),
    ("ACL 2025 main conference", "ACL"),
    ("NeurIPS 2025 spotlight", "NeurIPS"),
    ("ICML 2025 (oral). Code: https://github.com/x/y", "ICML"),
    ("Accepted as a long paper at EMNLP 2025", "EMNLP"),
    ("Accepted as an oral presentation at AAAI 2026", "AAAI"),
    ("Accepted to Findings of ACL 2025", "ACL"),
    ("Findings of EMNLP 2025", "EMNLP"),
    ("NIPS 2017 camera-ready", "NeurIPS"),
    ("accepted at naacl-hlt 2025", "NAACL"),
    ("Accepted at ICML-25", "ICML"),
    ("NeurIPS'24", "NeurIPS"),
    ("Accepted at The Web Conference 2025", "WWW"),
    ("Published in Nature Machine Intelligence", "Nature Machine Intelligence"),
    ("Accepted at RecSys 2025. 10 pages", "RecSys"),
    ("Submitted to NeurIPS 2025; accepted at ICML 2025", "ICML"),
    ("Accepted at the 48th International ACM SIGIR Conference on Research and Development in Information "
     "Retrieval (SIGIR 2025)", "SIGIR"),
]


@pytest.mark.parametrize(("comment", "venue"), ACCEPTED_COMMENTS)
def test_accepted_comments(comment, venue):
    match = detect_venue(comment, None)
    assert match is not None, comment
    assert match.venue == venue
    assert match.field == "comment"
    assert match.phrase and match.phrase.lower() in comment.lower()


REJECTED_COMMENTS = [
    "Submitted to ICML 2025",
    "Under review at NeurIPS 2025",
    "Under review as a conference paper at ICLR 2026",
    "In submission to KDD 2025",
    "Under submission; ACL 2025",
    "Submitted to EMNLP 2025",
    "Preprint. ICML 2025",
    "This is a preprint of a paper under review",
    "Work in progress",
    "Work-in-progress, NeurIPS 2025 style",
    "12 pages, 4 figures",
    "10 pages, 5 figures, 3 tables; code available at https://www.example.org",
    "Accepted at the ICML 2025 Workshop on Foundation Models",
    "NeurIPS 2024 Workshop on Efficient Natural Language and Speech Processing",
    "Accepted at MICCAI 2025",  # a real venue, but not on the configured list
    "Accepted at the International Conference on Data Science 2025",  # "Science" inside a longer name
    "Code for our ICML paper",  # a bare venue without a year is not a claim
    "",
    None,
]


@pytest.mark.parametrize("comment", REJECTED_COMMENTS)
def test_not_accepted_comments(comment):
    assert detect_venue(comment, None) is None


def test_negative_phrase_wins_over_a_bare_venue_mention():
    assert detect_venue("ICML 2025", None) is not None
    assert detect_venue("ICML 2025. Under review.", None) is None
    # An explicit acceptance stands even beside a negative phrase about something else.
    assert detect_venue("Accepted at ICML 2025. Extended version under review at JMLR", None).venue == "ICML"


@pytest.mark.parametrize(
    ("journal_ref", "venue"),
    [
        ("Findings of the Association for Computational Linguistics: EMNLP 2025", "EMNLP"),
        ("Proceedings of the North American Chapter of the Association for Computational Linguistics 2025",
         "NAACL"),
        ("Transactions on Machine Learning Research (2025)", "TMLR"),
        ("Proc. SIGIR 2024, pp. 100-110", "SIGIR"),
        ("Phys. Rev. D 105, 012345 (2022)", "Phys. Rev. D"),
        ("Information Processing & Management 62(4):104123, 2025", "Information Processing & Management"),
    ],
)
def test_any_journal_ref_means_published(journal_ref, venue):
    match = detect_venue(None, journal_ref)
    assert match == VenueMatch(venue=venue, phrase=journal_ref, field="journal_ref")


def test_journal_ref_beats_a_negative_comment_and_explicit_comment_beats_journal_ref():
    assert detect_venue("Under review", "JMLR 26(1), 2025").field == "journal_ref"
    match = detect_venue("Accepted at ICLR 2025", "JMLR 26(1), 2025")
    assert (match.venue, match.field) == ("ICLR", "comment")


def test_blank_or_negative_journal_ref_is_ignored():
    assert detect_venue(None, "   ") is None
    assert detect_venue(None, "Submitted to Phys. Rev. Lett.") is None


def test_matching_is_case_insensitive_on_word_boundaries():
    assert detect_venue("accepted at icml 2025", None).venue == "ICML"
    # ACL must not match inside NAACL, EACL or TACL.
    assert detect_venue("Accepted at EACL 2024", None).venue == "EACL"
    assert detect_venue("Accepted to TACL", None).venue == "TACL"
    assert detect_venue("Accepted at NAACL 2025", None).venue == "NAACL"
    # A URL containing a venue-like token is not a venue.
    assert detect_venue("See https://www.acl.org/x and www.example.com 2025", None) is None


def test_custom_venue_list_keeps_aliases():
    assert detect_venue("Accepted at NIPS 2017", None, ["NeurIPS"]).venue == "NeurIPS"
    assert detect_venue("Accepted at ICML 2025", None, ["NeurIPS"]) is None
    assert detect_venue("Accepted at MICCAI 2025", None, [*DEFAULT_VENUES, "MICCAI"]).venue == "MICCAI"


def test_workshops_can_be_allowed():
    comment = "Accepted at the ICML 2025 Workshop on Foundation Models"
    assert detect_venue(comment, None) is None
    assert detect_venue(comment, None, accept_workshops=True).venue == "ICML"


def test_default_venues_cover_the_major_venues():
    for venue in ["ICML", "NeurIPS", "ICLR", "ACL", "EMNLP", "NAACL", "EACL", "COLING", "TACL", "CVPR", "ICCV",
                  "ECCV", "AAAI", "IJCAI", "KDD", "SIGIR", "WWW", "TheWebConf", "WSDM", "CIKM", "RecSys", "TMLR",
                  "JMLR", "COLM", "UAI", "AISTATS", "CoRL", "ICRA", "IROS", "Nature", "Science"]:
        assert venue in DEFAULT_VENUES
    assert len(set(DEFAULT_VENUES)) == len(DEFAULT_VENUES)
