"""A prompt's text is part of what its version names: editing a prompt without a new version fails here.

Scores and cached calls are stored under the prompt versions that produced them (metric_version, the
llm_calls request); a prompt edited in place would silently mix old and new meanings under one version.
To change a prompt, add `<name>_v<N+1>.txt` (its first line `version: <name>_v<N+1>`), point the code at it,
and pin it below. Released versions are never edited, only added.
"""

import hashlib
from pathlib import Path

import pytest

LIBRARY = Path(__file__).resolve().parents[2] / "include" / "deepscholar"

# version -> sha256 of the prompt file. Never edit a line here; only add new ones.
PINNED = {
    "race_scoring_v1": "dfb0c56574274f0467295c5e04a6c70c62687df3fa1de179823f318c14932060",
    "race_scoring_v2": "cec2475db028ca2defa61fd531692ec8c9c14e9ced1bc425a7cc6ada7576cd1c",
    "race_criteria_v1": "452e7abe9cc4a1a38a6dc939b895492d1ac2dc6fce96ad7826ea7dad5c2d4a47",
    "race_weights_v1": "a9d2661646dfa8a1205a1c4211d29132763e0a67aa2cffd028df6a8c4e4c3137",
    "citation_precision_v1": "a7dc82756272e6259640906518989c21281519c266ee4a82c1436aeddcf01a70",
    "citation_precision_v2": "f322565a1b1474f2a5a88f77095dd8340b39766c3f73f45459dbe660ec0b3704",
    "cited_statement_match_v1": "7599c77efada49dcb613616b66349bf55c0126604bbb3c74af1d3de6c9e9335c",
    "fact_support_v1": "653fc50eacea04da03df34ed7be734d797b28555304306152b70ce1a44266c6e",
    "claim_coverage_v1": "98ba7450fced95ac780d39091bd0a681afa51d980a98506705568e827ef62db2",
    "claim_coverage_v2": "8d31f3d18828dfc79a5dd48ee010f1e91aced80217cade82f01b4de3d657519e",
    "nugget_coverage_v1": "8149b7714ed3a96eeb210ea57be1aa7a85593e0e7143f538061b90e17fd430b4",
    "nugget_coverage_v2": "4e221dba615160830a8f8c9606c5875f3ecd3e12f81a894e10dca9dcb8ff520d",
    "organization_v1": "a00e56c3cb59aa4e5919f43289c466d6aa3b17caa8b4f6ee4d6f8d71937696d4",
    "organization_v2": "aecb5f9e102c15027f20be125b8c5b89cf6b719436fbfaf7cfb242943261d1d2",
    "relevance_rate_v1": "b8fff3e7d6d75e285d825f571f930a2d25334fb49ed41daf16c59e5913b82290",
    "relevance_rate_v2": "cc03e5d49199d5e2c930f50f4d251726b1c5aa29ba014455af8ceaadcbcdb7ac",
    "importance_v1": "025fd09c7a47dc06826a8a43afc826a9878e7024a8712dac2574ff04ddc6fd8c",
    "importance_v2": "d65d490b50291e60c9bc483d6416690a1b9a02a969cf2ee9f334026f98fd7e37",
    "nugget_labels_v1": "6146a1460384d09d61f625fda7623ff05cff72439ffe127e27e1f82850f8db6e",
    "nugget_labels_v2": "f55c012a429556c1050a1cc217937341d5c9de9f40073bd862f0008b033cb38d",
    "nuggetize_v1": "c240d949fedc7fe4371c70c0e90043512bc734a9110205d509bc50029cb7f043",
    "nuggetize_v2": "8bd44644b72e39f8ba1f70be0c4d894d42da1b440293d573f8d39f1004007838",
    "deepscholar_base_aggregate_v1": "eecbadcbe8c5ddcad28b37b5961b86e38492ed9073b9a9177da77da1b4bb78fa",
    "deepscholar_base_filter_v1": "e3dcc512f204a23a09f7e3162f110b73ba48dc2d03f1f26dd0f7a757edfd4e4e",
    "deepscholar_base_queries_v1": "f90a6febfd20f5f3cb50ed2aca907a095c185b5a53b16e1fcfd666b7a1ad109b",
    "deepscholar_base_rank_v1": "50b635d8e34ff9063d45505c4edc7e8cfa71380ba00b44bc42a63f393f1b5c5b",
    "search_agent_final_v1": "a9cd0ff7cd6c672edb4b2b5def586a4b4ee1529589295b7493a0811d061774ac",
    "search_agent_v1": "d82c7b8af96556b1e9f193281a98b359562a38c1953c07455fa699bd8bc8d7ce",
    "claims_connection_v1": "26cf433a4d2dc17853b7619c5575d6477231528a7e18bd7c235c945fe6e48b96",
    "uncited_claim_extract_v1": "4d7fb682c09a053855cd44a6ec59f49f1628952d06d39c7fbbe6ecdda64b70bd",
    "uncited_claim_verdict_v1": "2a4c16f54fff8297d415d8ec0b18bd5f521d394c9ca49496fb22c48c99e2c2ca",
    "gt_claims_v1": "d40f384d620005ba68fccf10709b071d9195abdce88f818545bbe30fb7efc2b0",
}


def _prompt_files() -> dict[str, Path]:
    return {p.stem: p for p in sorted(LIBRARY.rglob("prompts/*.txt"))}


@pytest.mark.parametrize("version", sorted(PINNED))
def test_a_released_prompt_is_unchanged(version):
    files = _prompt_files()
    assert version in files, f"prompt {version} was removed; stored scores name it, restore it"
    digest = hashlib.sha256(files[version].read_bytes()).hexdigest()
    assert digest == PINNED[version], (
        f"{files[version]} changed without a new version: restore it and add {version.rsplit('_v', 1)[0]}_v<N+1>.txt "
        "instead (see this module's docstring)")


def test_every_prompt_is_pinned_and_names_its_own_version():
    for version, path in _prompt_files().items():
        first = path.read_text(encoding="utf-8").partition("\n")[0].strip()
        assert first == f"version: {version}", f"{path}: the first line must be 'version: {version}'"
        assert version in PINNED, (f"{path} is not pinned: add \"{version}\": "
                                   f"\"{hashlib.sha256(path.read_bytes()).hexdigest()}\" to PINNED once it is final")
