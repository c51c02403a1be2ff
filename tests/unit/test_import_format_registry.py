"""The import-format registry: formats are found by their modules, unknown names are refused loudly, and a
format declared in one place (here, this test module) is recognised by `--format auto` with nothing else
changed."""

from __future__ import annotations

import json

import pytest

from deepscholar.errors import InvalidInput
from deepscholar.systems.base import Report
from deepscholar.systems.external import formats
from deepscholar.systems.external.formats import (
    ExternalOutput,
    ImportFormat,
    Reader,
    detect_format,
    read_outputs,
)

BUILT_IN = ("jsonl", "deepscholar-base", "search-ai", "openscholar", "deepresearcher", "storm", "markdown")


def test_every_format_module_is_found_in_listing_order():
    assert formats.format_names() == BUILT_IN


@pytest.mark.parametrize("call", [lambda p: read_outputs(p, "storms"), lambda p: formats.get("storms")])
def test_a_mistyped_format_is_refused_with_the_known_ones_listed(tmp_path, call):
    with pytest.raises(InvalidInput, match=r"unknown format 'storms'; known: auto, jsonl, deepscholar-base, "
                                           r"search-ai, openscholar, deepresearcher, storm, markdown"):
        call(tmp_path)


def _parse_csv_report(unit):
    text = unit.data.split("\n", 1)[1]
    return [ExternalOutput(key=unit.key, report=Report(text=text, sources=[]), path=str(unit.path), format="toy")]


TOY = ImportFormat(name="toy", position=99, parse=_parse_csv_report, suffixes=(".toy",),
                   reader=Reader("toy text", lambda p: p.read_text(encoding="utf-8")),
                   recognise=lambda text: text.startswith("TOY\n"), unrecognised="not a toy report")


def test_a_format_declared_once_is_recognised_and_read(tmp_path):
    (tmp_path / "2501.00001.toy").write_text("TOY\nA report [1].", encoding="utf-8")
    (tmp_path / "other.toy").write_text("something else", encoding="utf-8")  # ignored in a folder
    with formats.registered(TOY):
        assert "toy" in formats.format_names()
        assert detect_format(tmp_path) == "toy"
        [out] = read_outputs(tmp_path)
        assert (out.key, out.format, out.report.text) == ("2501.00001", "toy", "A report [1].")
        [refused] = read_outputs(tmp_path / "other.toy")  # given on its own: refused with the reason
        assert refused.error == "not a toy report"
    assert "toy" not in formats.format_names()


def test_forcing_a_format_onto_another_shape_is_reported_per_output(tmp_path):
    (tmp_path / "0.jsonl").write_text(json.dumps({"text": "x [1]", "sources": [{"idx": 1, "title": "t"}]}) + "\n")
    [out] = read_outputs(tmp_path, "markdown")
    assert out.report is None and out.error == "a jsonl output, not markdown (--format auto reads it)"


def test_json_formats_share_a_shape_so_one_may_be_forced_onto_another(tmp_path):
    (tmp_path / "2501.00001.json").write_text(json.dumps({"output": "A claim [1].", "ctxs": [{"title": "T"}]}))
    assert detect_format(tmp_path) == "search-ai"
    [out] = read_outputs(tmp_path, "deepresearcher")
    assert out.error is None and out.format == "deepresearcher"


@pytest.mark.parametrize(("change", "error"), [
    ({"name": "Bad Name"}, "a format name is lower-case"),
    ({"name": "auto"}, "not one of auto"),
    ({"suffixes": ()}, "neither a folder rule nor file suffixes"),
    ({"reader": None}, "`recognise` needs a `reader`"),
    ({"name": "storm"}, "'storm' is already registered"),
    ({"version": ""}, "`version` is a short string"),
    ({"version": 2}, "`version` is a short string"),
])
def test_a_malformed_declaration_is_refused(change, error):
    fields = {f: getattr(TOY, f) for f in TOY.__dataclass_fields__} | change
    with pytest.raises(InvalidInput, match=error):
        formats.register(ImportFormat(**fields))
    assert formats.format_names() == BUILT_IN


def test_import_reports_help_lists_every_registered_format(capsys):
    from deepscholar.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["import-reports", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert all(name in shown.replace("- ", "-") for name in formats.format_names())
