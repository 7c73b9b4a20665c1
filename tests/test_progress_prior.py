"""The collector's "about N left" from earlier runs on the machine (collector.progress prior_times,
collector.runner.earlier_times): an estimate before the first cell ends, scaled by how this run's
finished cells compare with the same cells in the earlier runs."""
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq

from collector.progress import Progress, prior_times


def test_earlier_runs_give_an_estimate_before_any_cell_finished_and_are_scaled_by_this_run():
    prior = prior_times([{"model": "mlp", "phase": "infer", "mode": "default", "cell_wall_s": 10.0},
                         {"model": "gpt", "phase": "train", "mode": "default", "cell_wall_s": 100.0}])
    plan = [(0, "mlp", "infer", "default"), (0, "gpt", "train", "default"), (0, "gpt", "train", "default")]
    p = Progress(3, out=io.StringIO(), plan=plan, prior=prior)
    assert p.estimate_left(1) == 210.0  # 10 + 100 + 100, before anything ran
    p.done({"status": "ok"}, 20.0, k=1)  # this run's mlp took twice the earlier one: this machine is slower
    assert p.estimate_left(2) == 400.0  # the gpt cells it has not seen: 2 x 100 s, scaled by 2
    assert Progress(3, out=io.StringIO(), plan=plan).estimate_left(1) is None  # no earlier runs: no guess


def _run(root, run_id, device, processes, secs):
    d = root / run_id / "cells"
    d.mkdir(parents=True)
    (root / run_id / "run.json").write_text(json.dumps({"environment": {"device_name": device},
                                                        "protocol": {"processes": processes}}))
    pq.write_table(pa.table({"model": ["mlp"], "phase": ["infer"], "mode": ["default"], "cell_wall_s": [secs]}),
                   d / "c.parquet")


def test_earlier_times_reads_runs_of_this_kind_of_device_and_process_count_only(tmp_path):
    from types import SimpleNamespace

    from collector.runner import earlier_times

    _run(tmp_path, "old", "NVIDIA H200", 3, 30.0)
    _run(tmp_path, "other-gpu", "NVIDIA A100", 3, 99.0)
    _run(tmp_path, "one-process", "NVIDIA H200", 1, 7.0)
    _run(tmp_path, "now", "NVIDIA H200", 3, 55.0)  # the run being collected: not its own prior
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "run.json").write_text("{not json")
    target = SimpleNamespace(run_id="now", env={"device_name": "NVIDIA H200"},
                             matrix=SimpleNamespace(protocol=SimpleNamespace(processes=3)))
    got = earlier_times(tmp_path, [target])
    assert got[("cell", "mlp", "infer", "default")] == [30.0]


def test_an_interpreters_one_off_start_is_not_a_cell_time_and_is_counted_once_per_interpreter_to_start():
    """The H200 holdout collect (ho-h200, 3 interpreters interleaved): the first cell took 51 s, 14 s
    of it the fork parent importing torch; without this the estimate at cell 2 was 20 x 51 s = 17m,
    1.59x the 10m43s that remained."""
    plan = [(i % 3, "resnet50", "infer", "default") for i in range(21)]
    out = io.StringIO()
    p = Progress(21, out=out, plan=plan)
    p.done({"status": "ok"}, 51.0, k=1, startup=14.0)
    assert "[51s]" in out.getvalue()  # the line shows the cell's whole wall time
    # 20 cells at 37 s, and interpreters 1 and 2 each start their parent once more
    assert p.estimate_left(2) == 20 * 37.0 + 2 * 14.0
    p.done({"status": "ok"}, 51.0, k=2, startup=14.0)
    assert p.estimate_left(3) == 19 * 37.0 + 14.0
    q = Progress(21, out=io.StringIO(), plan=plan)
    q.done({"status": "ok"}, 51.0, k=1, startup=None)  # the exec launcher: no parent, nothing set apart
    assert q.estimate_left(2) == 20 * 51.0
