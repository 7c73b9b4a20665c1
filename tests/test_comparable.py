"""One rule for when two runs go together (collector.record.comparable), the same on every side: a resumed
run, a merged shard, a SLURM node (JOIN) and a comparison or the gate (COMPARE). Before it, a PROFILE=1
run resumed over a PROFILE=0 run (the kernel profile does not change what is measured) but could not be
compared with it, and shards of one run with another timeout could not be merged though the run could be
resumed with it."""
import io
import json

import pytest

from analysis.commands import screen
from analysis.compare_report.compare import check_comparable
from analysis.data.load import Run
from analysis.run_report import suites
from collector.commands import shard
from collector.host import store
from support.launchers import OkLauncher
from collector.host.runner import collect
from collector.plan import matrix as mx
from collector.record import comparable, settings

ENV = {"device": "cpu", "device_name": "x", "torch_version": "1", "hostname": "h"}


def _collect(tmp_path, run_id, model="mlp", **protocol):
    """A run of one cell (shards of one matrix measure different cells)."""
    m = mx.build_matrix("smoke", {"models": [model], "modes": ["default"], "phases": ["infer"], "processes": 1,
                                  **protocol})
    collect(m, ENV, tmp_path, run_id, OkLauncher(), out=io.StringIO())
    return tmp_path / run_id


def _run(path) -> Run:
    manifest = json.loads((path / "run.json").read_text())
    return Run(path.name, path, manifest)


@pytest.mark.parametrize("key, a, b", [("kernel_profile", False, True), ("timeout_s", 900, 60),
                                       ("warm_compile", True, False), ("recompile_sweep", False, True)])
def test_a_setting_that_does_not_change_what_is_measured_stops_nothing(tmp_path, key, a, b):
    first = _collect(tmp_path / "a", "r", **{key: a})
    resumed = mx.build_matrix("smoke", {"models": ["mlp"], "processes": 1, key: b})
    store.prepare_run(first, "r", resumed, ENV)  # resume: no refusal
    other = _collect(tmp_path / "b", "r", "gnn", **{key: b})
    assert check_comparable(_run(first), _run(other)) == []  # compare (and the gate): no mismatch
    got = shard.merge(tmp_path / "m" / "r", [first, other], out=io.StringIO())  # merge: not mixed
    assert not got["mixed"]


def test_a_setting_that_changes_what_is_measured_stops_every_side_alike(tmp_path):
    first, other = _collect(tmp_path / "a", "r", blocks=4), _collect(tmp_path / "b", "r", "gnn", blocks=6)
    with pytest.raises(store.RunError, match=r"another protocol \(blocks: 4 -> 6\)"):
        store.prepare_run(first, "r", mx.build_matrix("smoke", {"models": ["mlp"], "processes": 1, "blocks": 6}), ENV)
    assert check_comparable(_run(first), _run(other)) == ["protocol blocks: 4 vs 6"]
    with pytest.raises(shard.ShardError, match="protocol blocks: 4 vs 6"):
        shard.merge(tmp_path / "m" / "r", [first, other], out=io.StringIO())


def test_another_torch_is_compared_but_never_joined():
    a = {"environment": ENV, "protocol": {}, "preset": "smoke"}
    b = {"environment": {**ENV, "torch_version": "2"}, "protocol": {}, "preset": "smoke"}
    assert comparable.differences(a, b, comparable.COMPARE) == []
    assert [d.words() for d in comparable.differences(a, b, comparable.JOIN)] == ["torch_version: '1' vs '2'"]
    assert [d.key for d in comparable.environment_differences(ENV, {**ENV, "device_name": "y"})] == ["device_name"]
    # compile_env is compared only where the first manifest recorded it (runs made before it was)
    assert comparable.environment_differences(ENV, {**ENV, "compile_env": {"X": "1"}}) == []
    assert comparable.environment_differences({**ENV, "compile_env": {}}, {**ENV, "compile_env": {"X": "1"}})
    c = {**b, "preset": "quick"}
    assert [d.words() for d in comparable.differences(a, c, comparable.COMPARE)] == ["matrix preset: 'smoke' vs 'quick'"]
    with pytest.raises(ValueError, match="purpose"):
        comparable.differences(a, b, "resume")


def test_an_old_manifest_is_read_with_the_values_runs_had_before_a_setting_existed():
    """A run made before `processes` existed was one process; it compares with a 1-process run."""
    old = {"environment": ENV, "protocol": {"blocks": 8}, "preset": "smoke"}
    new = {"environment": ENV, "protocol": {"blocks": 8, "processes": 1}, "preset": "smoke"}
    assert comparable.differences(old, new, comparable.COMPARE) == []
    three = {"environment": ENV, "protocol": {"blocks": 8, "processes": 3}, "preset": "smoke"}
    assert [d.words() for d in comparable.differences(old, three, comparable.JOIN)] == ["protocol processes: 1 vs 3"]
    assert settings.BEFORE["processes"] == 1


def _confirm_preset(path, model: str, n: int):
    """A preset as `confirm` writes one (analysis.commands.screen): its description names the cell count."""
    path.write_text(f'description = "{suites.CONFIRMATION.format(n)}"\ndevice = "auto"\nprocesses = 3\nblocks = 4\n'
                    f'models = ["{model}"]\nphases = ["infer"]\nmodes = ["default"]\ndtypes = ["float32"]\n'
                    'batch_sizes = [8]\ncompile_scopes = ["model"]\ndynamic = ["auto"]\n')
    return mx.build_matrix(str(path))


def test_a_later_confirmation_joins_an_earlier_ones_runs_as_one_comparison(tmp_path):
    """`versions_gpu.sh suites` with CONFIRM_INTO=: a second confirmation's preset (another name, the same
    protocol) collected into the first's runs, under each interpreter: one comparison holds both, the run
    says both presets and both descriptions, and `--after` leaves out every cell either confirmed."""
    first, later = _confirm_preset(tmp_path / "c.toml", "mlp", 1), _confirm_preset(tmp_path / "c2.toml", "gnn", 1)
    later_two = _confirm_preset(tmp_path / "c3.toml", "gnn", 2)
    for label in "ab":
        for m in (first, later, later):  # the later one twice: resumed, it adds no description again
            collect(m, ENV, tmp_path / "runs", f"c-{label}", OkLauncher(), out=io.StringIO())
    a, b = _run(tmp_path / "runs" / "c-a"), _run(tmp_path / "runs" / "c-b")
    assert a.manifest["matrices"] == ["c", "c2"] and a.manifest["preset"] == "c"
    assert a.manifest["description"] == "confirmation of 1 screened cells; confirmation of 1 screened cells"
    assert check_comparable(a, b) == []
    assert suites.chosen_caveat([a.manifest["description"]])  # still read as a confirmation
    assert screen.confirmed({r.run_id: r for r in (a, b)}, "c") == {
        "mlp__infer__float32__bs8__default__model", "gnn__infer__float32__bs8__default__model"}
    collect(later_two, ENV, tmp_path / "runs", "c-a", OkLauncher(), out=io.StringIO())
    assert _run(tmp_path / "runs" / "c-a").manifest["description"] == \
        "confirmation of 1 screened cells; confirmation of 1 screened cells; confirmation of 2 screened cells"
    with pytest.raises(store.RunError, match=r"another protocol \(blocks: 4 -> 6\)"):  # a protocol still stops it
        store.prepare_run(tmp_path / "runs" / "c-a", "c-a",
                          mx.build_matrix(str(tmp_path / "c3.toml"), {"blocks": 6}), ENV)
