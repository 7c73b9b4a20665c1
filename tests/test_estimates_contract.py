"""estimates.json as a contract: every published one validates against its schema
(analysis/data/schemas/), a fresh render of a run with a failed cell does too and lists that cell with its
status and error, and the checker catches what breaks the contract."""
from __future__ import annotations

import copy
import json

import pytest

from analysis.__main__ import main as analysis_main
from analysis.data.schema_check import SCHEMAS, check_file, errors
from conftest import ROOT

PUBLISHED = sorted((ROOT / "docs" / "examples").glob("*/estimates.json"))
RUN_SCHEMA = json.loads((SCHEMAS / "run-estimates.schema.json").read_text())


@pytest.mark.parametrize("path", PUBLISHED, ids=[p.parent.name for p in PUBLISHED])
def test_every_published_estimates_file_validates(path):
    assert check_file(path) == []


def test_a_fresh_run_render_lists_every_cell_with_numbers_and_metadata(fixture_copy, tmp_path):
    assert analysis_main(["--data", str(fixture_copy), "--out", str(tmp_path), "--reps", "50"]) == 0
    path = tmp_path / "fixture-small" / "estimates.json"
    assert check_file(path) == []
    data = json.loads(path.read_text())
    assert data["schema_version"] == 1 and data["kind"] == "run"
    assert data["run"]["device"] == "cuda" and data["run"]["processes"] >= 1
    assert sum(data["status_counts"].values()) == len(data["cells"]) == 7  # the failed cell is there
    failed = [c for c in data["cells"] if c["status"] != "ok"]
    assert [c["status"] for c in failed] == ["compile_error"] and failed[0]["error"]
    assert all(isinstance(g["speedup"], float) and g["call"] in ("faster", "slower", "no meaningful difference", "not determined")
               for g in data["groups"])


def test_the_checker_names_what_breaks_the_contract(fixture_copy, tmp_path):
    assert analysis_main(["--data", str(fixture_copy), "--out", str(tmp_path), "--reps", "50"]) == 0
    good = json.loads((tmp_path / "fixture-small" / "estimates.json").read_text())
    assert errors(good, RUN_SCHEMA) == []
    bad = copy.deepcopy(good)
    bad["groups"][0]["speedup"] = "1.50x faster"  # a display string where a number belongs
    del bad["cells"][0]["status"]
    bad["cells"][1]["extra"] = 1
    bad["generated_at"] = "2026-12-01 18:00 UTC"
    found = errors(bad, RUN_SCHEMA)
    assert any(e.startswith("$.groups[0].speedup: str") for e in found)
    assert "$.cells[0]: missing 'status'" in found and "$.cells[1]: unexpected 'extra'" in found
    assert any(e.startswith("$.generated_at:") for e in found)
    # the jsonschema package checks every keyword (the small checker, its stand-in without it, refuses
    # one it does not know); the two word the same breaches alike
    from collector.record import jsonschema as checker

    pytest.importorskip("jsonschema")
    assert errors(3, {"oneOf": [{"type": "integer"}, {"minimum": 0}]})[0].startswith("$: 3 is valid under each of")
    with pytest.raises(ValueError, match="not checked here: oneOf"):
        checker.subset_errors(1, {"oneOf": []})
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        errors(1, {"type": "integr"})
    assert sorted(errors(bad, RUN_SCHEMA)) == sorted(checker.subset_errors(bad, RUN_SCHEMA))


@pytest.mark.evidence
def test_the_jsonschema_package_and_the_stand_in_agree_on_every_committed_contract():
    """Every committed estimates.json and run.json against its schema, by the jsonschema package and by
    the small checker that stands in for it where it is not installed: both valid, and the same words
    for a run.json broken in the ways the report's loader takes apart."""
    pytest.importorskip("jsonschema")
    from collector.record import jsonschema as checker
    from collector.record import manifest
    from conftest import ROOT

    paths = sorted((ROOT / "docs" / "examples").glob("*/estimates.json"))
    assert len(paths) > 20
    for path in paths:
        data = json.loads(path.read_text())
        schema = json.loads((SCHEMAS / f"{'compare' if 'baseline' in data else 'run'}-estimates.schema.json").read_text())
        assert errors(data, schema) == checker.subset_errors(data, schema) == [], path
    runs = sorted((ROOT / "data" / "examples").glob("*/run.json"))
    for path in runs[:40]:
        data = json.loads(path.read_text())
        assert errors(data, manifest.SCHEMA) == checker.subset_errors(data, manifest.SCHEMA), path
    data = json.loads(runs[0].read_text())
    data["protocol"]["blocks"] = "six"
    data["sessions"].append({"started": 1})
    data["surprise"] = [1]
    del data["environment"]
    got = errors(data, manifest.SCHEMA)
    assert sorted(got) == sorted(checker.subset_errors(data, manifest.SCHEMA)), got
    assert "$: missing 'environment'" in got and "$: unexpected 'surprise'" in got
    assert any(g.startswith("$.protocol.blocks: str") for g in got)


@pytest.mark.evidence
def test_a_profiled_comparison_carries_the_step_split_as_numbers(tmp_path):
    """The published fourth-lease comparison (both runs PROFILE=1): estimates.json's step_split has a
    row per profiled side with [A, B] numbers that add up (step = kernels + rest) and the attribution
    the report prints; a pair that is not two numbers breaks the contract."""
    from conftest import ROOT

    path = ROOT / "docs" / "examples" / "compare-t5-torch2.11.0-cu130-vs-t5-torch2.14.1-cu130" / "estimates.json"
    data = json.loads(path.read_text())
    schema = json.loads((SCHEMAS / "compare-estimates.schema.json").read_text())
    assert errors(data, schema) == []
    rows = {(r["cell_id"].split("__")[0], r["side"]): r for r in data["step_split"]}
    assert len(rows) == 6
    for r in rows.values():
        for i in (0, 1):
            assert r["step_ms"][i] == pytest.approx(r["kernel_ms"][i] + r["rest_ms"][i])
            assert sum(v[i] for v in r["kinds_ms"].values()) == pytest.approx(r["kernel_ms"][i])
    assert rows[("gpt", "compiled")]["where"] == "host (beside the kernels)"
    assert rows[("moe", "compiled")]["where"] == "not called"
    bad = copy.deepcopy(data)
    bad["step_split"][0]["step_ms"] = [1.0]
    assert any("1 items, not 2 to 2" in e for e in errors(bad, schema))
