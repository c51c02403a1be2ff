"""A site part's key (site/content_keys.py): what renders a page is in it, the machine that builds is not."""

from __future__ import annotations

from deepscholar.settings import Settings
from deepscholar.site.content_keys import Stamps, code_key


def test_a_setting_that_shapes_pages_changes_the_key_and_the_workers_name_does_not():
    base = code_key(Settings.from_env({}))
    assert code_key(Settings.from_env({"DEEPSCHOLAR_WORKER_HOSTNAME": "worker-2"})) == base
    assert code_key(Settings.from_env({"DEEPSCHOLAR_CATEGORY_MIN_QUERIES": "7"})) != base


def test_a_months_key_follows_its_own_rows_and_systems_only():
    stamps = Stamps("code", tables={"2090-01": {"reports": "4.10", "board_versions": "1.5"},
                                    "2090-02": {"reports": "4.11"}},
                    systems={"a": "100", "b": "200"}, month_systems={"2090-01": {"a"}, "2090-02": {"b"}})
    board, reports = stamps.board("2090-01"), stamps.reports("2090-01", [1, 2])
    stamps.tables["2090-02"]["reports"] = "5.30"  # another month's rows
    stamps.systems["b"] = "201"  # a system the month does not show
    assert (stamps.board("2090-01"), stamps.reports("2090-01", [1, 2])) == (board, reports)
    stamps.tables["2090-01"]["board_versions"] = "2.9"  # a new board version: the boards, not the reports
    assert stamps.board("2090-01") != board and stamps.reports("2090-01", [1, 2]) == reports
    stamps.systems["a"] = "101"  # a system the month shows registered again
    assert stamps.reports("2090-01", [1, 2]) != reports
    assert stamps.reports("2090-01", [1]) != stamps.reports("2090-01", [1, 2])
