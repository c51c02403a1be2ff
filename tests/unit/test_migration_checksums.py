"""Released schema revisions are frozen: their SQL is pinned here, so an edit fails loudly.

A warehouse that already ran a revision never runs it again, so editing it would make old and new
warehouses silently differ. To change the schema, add a revision (deepscholar/migrations/__init__.py)
and pin its checksum below once it is final.
"""

import hashlib
import re
import shutil
from pathlib import Path

from deepscholar import migrations

# revision -> migrations.sql_checksum(revision). Never edit a line here; only add new ones.
RELEASED = {
    "0001_baseline": "134acd245f462615f25def4b67c7a5bf2c034c715eec7948b4e1a0379e2d39bb",
    "0002_report_quality_flags": "841311b1787d7f8752be9dab9c64a2744bca3a8d1c0d1240ae888188a2070e0c",
    "0003_benchmark_runs": "fc1f319980fdc142783956f73556f9bf71dd045aa85b74d58ec8502717a94b75",
    "0004_retrieved_sources": "9a4da3e95de2f5be492ec595631fb890ba0bfc0378738d3debbb49be522a42c5",
    "0005_sample_rank": "a03a248e3b2f2b7b2dc0245361f3ffb71e183b1dd9598ce5e81393da1d91cba2",
    "0006_resolution_cache": "d30d9b27324ce6ea5b8ae136f1fbd813b0dc32570be089728a90fd7b35849efc",
    "0007_host_rate_limits": "b16920916b20abb6c0d45e85fba4e005c571688640e414f97208f3abd76359ac",
    "0008_long_leaderboard": "7465f90b1803898aa5f863c2e285afb5f146c89e58f250b9cf959e11e08bf65c",
    "0009_judge_configs": "7b5bec4ff9ea1fcafdeada49a24e23f50a70d8b65ed019f9b0c2aac19f881e72",
    "0010_report_system_build": "2aa602b8a6d527d5fb97546c1e8b94f27c3025d73bf27524c46ee6e8588afee1",
    "0011_judge_claims": "3bbf982262fda15646836d3a4867f6d2e410e3749cd99b32f4b38eb779a693cb",
    "0012_judge_claims_holder_key": "aecc93d3e39de84c00bc2a5a210cb0efbeb4a29c31adc5a4bbe05bfb27708977",
    "0013_drop_metric_indexes": "4f9059b7e979282c9ac12483bcd7084ed671f7c6a5c1523f922a26bd332059c0",
    "0014_track_boards": "376d7ce488d3c185549dff3c821a40c086c7838fcfe82a349562a5c43d5f7da9",
    "0015_track_artefacts": "82650fa9151d0e5c38ee0da3e253546822d117572d337ccdd2dbff1215ec0d83",
    "0016_release_versions": "35ab23c9f27543311efb1ee8b9fe4dc5c821b3d4c276cf551d94e69eb9984163",
    "0017_board_versions": "e9f2dd4252f85a1edb3f7d7bf9cd04c905ae11e62b6b97ae45d0a3c1ba89c610",
    "0018_knowledge_cutoffs": "e26c86aad84722dac818e44a2292cd664f8694714f0850db1f10311ac202003d",
    "0019_judgment_requests": "50b0166ffd1fb3f295fad71c111889f90cfcf46c52739a37f3eac7c71906efb1",
    "0020_paper_licences": "f486bf44f9e703e79c4a1d17b66bed20ca2b067c3939727f45a06edb13d25ce2",
    "0021_annotations": "72905869b9edc38eaa68ab97aa02580fe3d10dc6a1fd53faa355b5348b6f5c89",
    "0022_judge_comparisons": "20a16d25e13c1948c53a081527335775ccc0295619cde296fcc31b4a931bee07",
    "0023_judge_drift": "f49f8aa10ddae3a75681d02ae67194cbea371b1133f0790d08bea2bc45ee0f9f",
    "0024_race_weight_samples": "fc6744badf1ceee9f29911cd5d674f3b58a673c099464c2786b5d2b4630b8af2",
    "0025_human_agreement_stats": "fbfa19265930e1a9938bd1e8ab899017a78d0c70cdf9945498eee6916ca74aea",
    "0026_system_endpoint_revision": "4700600361cf234e9957fb268dd518882a3c3bbb1f393daa5734435de61c1caa",
    "0027_month_costs": "0a4d04be02031b4cf5636f377a1efb0dcf45235c49c7c4329dd720bdfca7c1ce",
    "0028_month_costs_by_report": "3bb17b648d77cb04714a3910f3ce537542270de6765e507fc43a4f625b411963",
    "0029_llm_batches": "88f11349a2b63ebed060dfd5ac192576cbd3e40d3df3496300b6609b1f34cc8c",
    "0030_judging_spend": "c39b256587ced49df2750f3957ff2c32b6320665a1cc359a32f263e4b7591e53",
    "0031_month_calls_by_hash": "f6fcf114a2a8805039e507b79892c6d58866ee2f0f0b5d2dd92d23a3a9d98d0e",
    "0032_board_query_scores": "4b4f5d4d705a94e47fd9344c4a5fe3c7855524c2f6347a417f5faeaa86716dcc",
    "0033_month_generation_costs": "99c1508eec57ce5371c828ec411268df74a0463e09d9ce5787eb514119d6c07a",
    "0034_pooled_board_store": "8ef12d086f448b7979a98b023c91085d1e3fca927528dd4493b9c33431c3084e",
    "0035_month_judge_requests": "f4c8a0eaae3e0a6d3f4ab9696aba9d5b1ea7b46358c14053920b09dd699daed0",
    "0036_score_versions": "7d68ea749855e33c7bc582bb1edfd6c009b86420c4ad2d9ccd962a06708000d4",
    "0037_system_registration": "7fa49a984d0392c23faabdc9a31e6906da4ab3921fe5a1831d7ad45e645221f1",
    "0038_batch_queues": "cac59e8732181421eee64ccd98f4fa1703e7b66d2616b8b17aaea2a2de1bb6a0",
    "0039_spend_ledger": "75126ee96bc1dea6c532ce42aa0706bb7d16f7cbb7734315f19e131e0ffc76ae",
}
# The sha256 the pre-migration init_db recorded in schema_files for sql/001..004: the baseline is
# exactly those files, so adopted warehouses match it.
PRE_MIGRATION_FILES = {
    "001_release.sql": "c27f2ad7f9fabefe81331a32b740ab64c98232a52cf2d7ed113f55f8c5728c3b",
    "002_systems.sql": "ff7d65325408d2b6b07ff2f93ed05da9763325ff3d6ec9caa02577b4026ed36c",
    "003_evaluation.sql": "f1d568518677422abee8ff6d1bb3ce50172084c554ed84ee5852134139bd35b4",
    "004_leaderboard.sql": "12b2cdc49031429c064f0c0db01c639405eaed60b929d310c6d2080e11531a2a",
}


def test_released_revisions_are_unchanged():
    problems = migrations.released_revision_problems(RELEASED)
    assert not problems, "\n".join(problems)


def test_an_edited_released_revision_is_refused(tmp_path):
    versions = tmp_path / "versions"
    shutil.copytree(migrations.VERSIONS_DIR, versions)
    systems = versions / "0001_baseline" / "002_systems.sql"
    systems.write_text(systems.read_text().replace("    kind           text NOT NULL,\n",
                                                   "    kind           text NOT NULL,\n    tier text,\n"))
    flags = versions / "0002_report_quality_flags.sql"
    flags.write_text(flags.read_text() + "\n")  # even whitespace counts
    problems = migrations.released_revision_problems(RELEASED, versions)
    assert len(problems) == 2, problems
    for revision, problem in zip(["0001_baseline", "0002_report_quality_flags"], problems, strict=True):
        assert f"released revision {revision} was edited" in problem
        assert "add a new revision instead" in problem


def test_a_new_revision_must_be_pinned(tmp_path):
    versions = tmp_path / "versions"
    shutil.copytree(migrations.VERSIONS_DIR, versions)
    (versions / "0003_example.py").write_text('revision = "0003_example"\ndown_revision = "0002_report_quality_flags"\n')
    (versions / "0003_example.sql").write_text("SELECT 1;\n")
    (problem,) = migrations.released_revision_problems(RELEASED, versions)
    assert "0003_example has no pinned checksum" in problem


def test_baseline_is_the_pre_migration_schema_files():
    paths = migrations.sql_paths(migrations.BASELINE)
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths} == PRE_MIGRATION_FILES
    assert [p.name for p in paths] == sorted(PRE_MIGRATION_FILES)  # run in the old file-name order


def test_revision_files_form_one_linear_chain_named_after_their_ids():
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations.MIGRATIONS_DIR))
    script = ScriptDirectory.from_config(cfg)
    ids = migrations.revision_ids()
    assert script.get_heads() == [ids[-1]] == [migrations.head_revision()]
    previous = None
    for revision_id in ids:
        revision = script.get_revision(revision_id)
        assert Path(revision.path).stem == revision_id
        assert revision.down_revision == previous, f"{revision_id} must follow {previous}"
        assert len(revision_id) <= 32, "Alembic's version_num column is varchar(32)"
        assert migrations.sql_paths(revision_id), f"{revision_id} has no SQL"
        previous = revision_id
    # Every .py in versions/ is a revision the file-name ordering sees (no stray or misnamed files).
    assert sorted(p.stem for p in migrations.VERSIONS_DIR.glob("*.py")) == ids


def test_schema_changes_are_revisions_not_loose_sql_files():
    root_sql = Path(__file__).resolve().parents[2] / "sql"
    loose = [p.name for p in root_sql.glob("*.sql") if re.match(r"\d{3}_", p.name)]
    assert not loose, (f"{loose} in sql/ would never run: the schema changes through revisions in "
                       "include/deepscholar/migrations/versions/ (see docs/ARCHITECTURE.md)")
