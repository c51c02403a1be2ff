"""The OAI-PMH licence parser (sources/oai.py) on the answers arXiv gives, and which licences allow
redistribution (release/licences.py)."""

from __future__ import annotations

import pytest

from deepscholar.errors import InfrastructureError
from deepscholar.release.licences import allows_redistribution
from deepscholar.settings import Settings
from deepscholar.sources.oai import MalformedOaiResponse, OaiProtocolError, parse_licence_record

HEAD = ('<?xml version="1.0" encoding="UTF-8"?>\n<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><responseDate>2025-07-01T00:00:00Z</responseDate>'
        '<request verb="GetRecord" identifier="oai:arXiv.org:{id}" metadataPrefix="arXiv">'
        'http://export.arxiv.org/oai2</request>')


def _record(arxiv_id: str, licence: str | None) -> str:
    element = f"<license>{licence}</license>" if licence else ""
    return (HEAD.format(id=arxiv_id) + "<GetRecord><record><header><identifier>oai:arXiv.org:" + arxiv_id
            + "</identifier><datestamp>2025-06-05</datestamp><setSpec>cs</setSpec></header><metadata>"
            '<arXiv xmlns="http://arxiv.org/OAI/arXiv/" xsi:schemaLocation="http://arxiv.org/OAI/arXiv/ '
            f'http://arxiv.org/OAI/arXiv.xsd"><id>{arxiv_id}</id><created>2025-06-03</created><authors><author>'
            "<keyname>Doe</keyname><forenames>Jane</forenames></author></authors><title>A title</title>"
            f"<categories>cs.CL</categories>{element}<abstract>An abstract.</abstract></arXiv></metadata>"
            "</record></GetRecord></OAI-PMH>")


def test_a_cc_by_record_gives_its_licence_url():
    record = parse_licence_record(_record("2506.01001", "http://creativecommons.org/licenses/by/4.0/").encode(),
                                  "2506.01001")
    assert (record.license, record.error) == ("http://creativecommons.org/licenses/by/4.0/", None)


def test_a_non_exclusive_record_gives_arxivs_licence():
    record = parse_licence_record(_record("2506.01002", "http://arxiv.org/licenses/nonexclusive-distrib/1.0/"),
                                  "2506.01002")
    assert record.license == "http://arxiv.org/licenses/nonexclusive-distrib/1.0/" and record.error is None


def test_a_record_without_a_licence_element_is_unknown():
    record = parse_licence_record(_record("hep-th/9901001", None), "hep-th/9901001")
    assert (record.license, record.error) == (None, None)


def test_id_does_not_exist_is_recorded_and_other_errors_are_raised():
    missing = HEAD.format(id="2506.99999") + ('<error code="idDoesNotExist">Malformed identifier: '
                                              "oai:arXiv.org:2506.99999</error></OAI-PMH>")
    record = parse_licence_record(missing, "2506.99999")
    assert record.license is None and record.error.startswith("idDoesNotExist: ")
    bad_format = HEAD.format(id="2506.01001") + ('<error code="cannotDisseminateFormat">Bad metadataPrefix'
                                                 "</error></OAI-PMH>")
    with pytest.raises(OaiProtocolError, match="cannotDisseminateFormat") as raised:
        parse_licence_record(bad_format, "2506.01001")
    assert isinstance(raised.value, InfrastructureError)  # fails the task: the endpoint is not the one we think


def test_a_deleted_record_and_broken_answers():
    deleted = (HEAD.format(id="2506.01003") + '<GetRecord><record><header status="deleted"><identifier>'
               "oai:arXiv.org:2506.01003</identifier><datestamp>2025-06-05</datestamp></header></record>"
               "</GetRecord></OAI-PMH>")
    assert parse_licence_record(deleted, "2506.01003").error.startswith("deleted")
    whole = _record("2506.01001", "http://creativecommons.org/licenses/by/4.0/")
    for broken in (whole[: len(whole) // 2], "<html><body>proxy error</body></html>",
                   _record("2506.01009", None)):
        with pytest.raises(MalformedOaiResponse):
            parse_licence_record(broken, "2506.01001")


@pytest.mark.parametrize(("licence", "allowed"), [
    ("http://creativecommons.org/licenses/by/4.0/", True),
    ("https://creativecommons.org/licenses/by-sa/4.0/", True),
    ("http://creativecommons.org/licenses/by-nc-nd/4.0/", True),
    ("http://creativecommons.org/publicdomain/zero/1.0/", True),
    ("http://creativecommons.org/licenses/publicdomain/", True),
    ("http://arxiv.org/licenses/nonexclusive-distrib/1.0/", False),
    ("http://arxiv.org/licenses/assumed-1991-2003/", False),
    (None, False),
])
def test_the_default_setting_allows_creative_commons_and_public_domain_only(licence, allowed):
    assert allows_redistribution(licence, Settings().redistributable_licences) is allowed


def test_the_allowed_licences_are_a_setting():
    narrowed = Settings.from_env({"DEEPSCHOLAR_REDISTRIBUTABLE_LICENCES": "http://creativecommons.org/licenses/by/"})
    assert allows_redistribution("http://creativecommons.org/licenses/by/4.0/", narrowed.redistributable_licences)
    assert not allows_redistribution("http://creativecommons.org/licenses/by-nc/4.0/",
                                      narrowed.redistributable_licences)
    assert Settings.from_env({"DEEPSCHOLAR_REDISTRIBUTABLE_LICENCES": "none"}).redistributable_licences == ()
