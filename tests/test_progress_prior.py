"""The collector's "about N left" from earlier runs on the machine (collector.host.progress prior_times,
collector.host.earlier.earlier_times): an estimate before the first cell ends, scaled by how this run's
finished cells compare with the same cells in the earlier runs."""
import io
import json

import pyarrow as pa
import pytest
import pyarrow.parquet as pq

from collector.host.progress import Progress, prior_times


def quiet_host():
    """The host's load as an uncrowded host's: the estimates' arithmetic, whatever else this machine runs
    (a crowded one stretches every estimate: 210 s read 276.5 s beside a full test suite)."""
    return None


def test_earlier_runs_give_an_estimate_before_any_cell_finished_and_are_scaled_by_this_run():
    prior = prior_times([{"model": "mlp", "phase": "infer", "mode": "default", "cell_wall_s": 10.0},
                         {"model": "gpt", "phase": "train", "mode": "default", "cell_wall_s": 100.0}])
    plan = [(0, "mlp", "infer", "default"), (0, "gpt", "train", "default"), (0, "gpt", "train", "default")]
    p = Progress(3, out=io.StringIO(), plan=plan, prior=prior, load=quiet_host)
    assert p.estimate_left(1) == 210.0  # 10 + 100 + 100, before anything ran
    p.done({"status": "ok"}, 20.0, k=1)  # this run's mlp took twice the earlier one: this machine is slower
    assert p.estimate_left(2) == 400.0  # the gpt cells it has not seen: 2 x 100 s, scaled by 2
    no_prior = Progress(3, out=io.StringIO(), plan=plan, load=quiet_host)
    assert no_prior.estimate_left(1) is None  # no earlier runs: no guess


def _run(root, run_id, device, processes, secs):
    d = root / run_id / "cells"
    d.mkdir(parents=True)
    (root / run_id / "run.json").write_text(json.dumps({"environment": {"device_name": device},
                                                        "protocol": {"processes": processes}}))
    pq.write_table(pa.table({"model": ["mlp"], "phase": ["infer"], "mode": ["default"], "cell_wall_s": [secs]}),
                   d / "c.parquet")


def test_earlier_times_reads_runs_of_this_kind_of_device_and_process_count_only(tmp_path):
    from types import SimpleNamespace

    from collector.host.earlier import earlier_times

    _run(tmp_path, "old", "NVIDIA H200", 3, 30.0)
    _run(tmp_path, "other-gpu", "NVIDIA A100", 3, 99.0)
    _run(tmp_path, "one-process", "NVIDIA H200", 1, 7.0)
    _run(tmp_path, "now", "NVIDIA H200", 3, 55.0)  # the run being collected: not its own prior
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "run.json").write_text("{not json")
    target = SimpleNamespace(run_id="now", env={"device_name": "NVIDIA H200"}, launcher=SimpleNamespace(name="exec"),
                             matrix=SimpleNamespace(protocol=SimpleNamespace(processes=3, cold_replicates=False), cells=[]))
    got = earlier_times(tmp_path, [target])
    assert got[("cell", "mlp", "infer", "default")] == [30.0]


def test_an_interpreters_one_off_start_is_not_a_cell_time_and_is_counted_once_per_interpreter_to_start():
    """The H200 holdout collect (ho-h200, 3 interpreters interleaved): the first cell took 51 s, 14 s
    of it the fork parent importing torch; without this the estimate at cell 2 was 20 x 51 s = 17m,
    1.59x the 10m43s that remained."""
    plan = [(i % 3, "resnet50", "infer", "default") for i in range(21)]
    out = io.StringIO()
    p = Progress(21, out=out, plan=plan, load=quiet_host)
    p.done({"status": "ok"}, 51.0, k=1, startup=14.0)
    assert "[51s]" in out.getvalue()  # the line shows the cell's whole wall time
    # 20 cells at 37 s, and interpreters 1 and 2 each start their parent once more
    assert p.estimate_left(2) == 20 * 37.0 + 2 * 14.0
    p.done({"status": "ok"}, 51.0, k=2, startup=14.0)
    assert p.estimate_left(3) == 19 * 37.0 + 14.0
    q = Progress(21, out=io.StringIO(), plan=plan, load=quiet_host)
    q.done({"status": "ok"}, 51.0, k=1, startup=None)  # the exec launcher: no parent, nothing set apart
    assert q.estimate_left(2) == 20 * 51.0


def test_earlier_runs_first_cells_set_their_parents_start_apart_and_published_runs_stand_in(tmp_path):
    """An earlier command's first cell held its fork parent's 14 s start (run.json's sessions); as a
    prior it counts without it, as the live estimate does. Where the runs folder holds no run of this
    kind, the published runs beside it (data/examples beside data/runs) stand in."""
    from types import SimpleNamespace

    from collector.host.earlier import earlier_times

    runs, examples = tmp_path / "runs", tmp_path / "examples"
    runs.mkdir()
    d = examples / "old" / "cells"
    d.mkdir(parents=True)
    session = {"started_at": "2026-12-01T10:00:00+00:00", "finished_at": "2026-12-01T10:05:00+00:00",
               "launchers": [{"parent_import_s": 14.0}]}
    (examples / "old" / "run.json").write_text(json.dumps({"environment": {"device_name": "NVIDIA H200"},
                                                           "protocol": {"processes": 3}, "sessions": [session]}))
    for i, (at, secs) in enumerate((("2026-12-01T10:00:01+00:00", 40.0), ("2026-12-01T10:00:41+00:00", 26.0))):
        pq.write_table(pa.table({"model": ["mlp"], "phase": ["infer"], "mode": ["default"], "cell_wall_s": [secs],
                                 "started_at": [at]}), d / f"c{i}.parquet")
    target = SimpleNamespace(run_id="now", env={"device_name": "NVIDIA H200"}, launcher=SimpleNamespace(name="exec"),
                             matrix=SimpleNamespace(protocol=SimpleNamespace(processes=3, cold_replicates=False), cells=[]))
    assert sorted(earlier_times(runs, [target])[("cell", "mlp", "infer", "default")]) == [26.0, 26.0]
    _run(runs, "mine", "NVIDIA H200", 3, 30.0)  # a run of this kind in the runs folder: it alone counts
    assert earlier_times(runs, [target])[("cell", "mlp", "infer", "default")] == [30.0]


def test_a_cell_the_earlier_runs_lack_scales_them_by_its_model_and_phase():
    """A collect with another launcher (every cell imports torch: 2.3x the earlier runs' times): its
    first cell, a mode the earlier runs lack, still scales them through the same model and phase."""
    prior = prior_times([{"model": "mlp", "phase": "infer", "mode": "default", "cell_wall_s": 20.0},
                         {"model": "gpt", "phase": "train", "mode": "default", "cell_wall_s": 40.0}])
    plan = [(0, "mlp", "infer", "reduce-overhead"), (0, "gpt", "train", "default")]
    p = Progress(2, out=io.StringIO(), plan=plan, prior=prior, load=quiet_host)
    p.done({"status": "ok"}, 46.0, k=1)
    assert p.estimate_left(2) == 40.0 * 46.0 / 20.0


def test_earlier_runs_of_another_launcher_are_not_a_prior(tmp_path):
    """quick-h200 (every process started torch itself, 52-79 s a cell) as a prior for a fork-launched
    quick collect (13-42 s) put the estimate 1.9x high: a run counts only with this run's launcher."""
    from types import SimpleNamespace

    from collector.host.earlier import earlier_times

    _run(tmp_path, "old-exec", "NVIDIA H200", 3, 70.0)  # no launcher recorded: before the fork launcher
    _run(tmp_path, "fork", "NVIDIA H200", 3, 30.0)
    manifest = json.loads((tmp_path / "fork" / "run.json").read_text())
    manifest["sessions"] = [{"started_at": "2026-12-04T01:00:00+00:00", "launchers": [{"launcher": "fork"}]}]
    (tmp_path / "fork" / "run.json").write_text(json.dumps(manifest))
    for name, want in (("fork", [30.0]), ("exec", [70.0])):
        target = SimpleNamespace(run_id="now", env={"device_name": "NVIDIA H200"}, launcher=SimpleNamespace(name=name),
                                 matrix=SimpleNamespace(protocol=SimpleNamespace(processes=3, cold_replicates=False), cells=[]))
        assert earlier_times(tmp_path, [target])[("cell", "mlp", "infer", "default")] == want


def test_the_line_says_when_cells_of_untimed_models_are_guessed():
    """eta5-h200 (no earlier run): at cell 2 the four ResNet-18 cells were guessed from the MLP's
    (about 1m33s left against 2m38s): the line says how many cells are such a guess."""
    plan = [(0, "mlp", "infer", "default"), (0, "mlp", "train", "default"),
            (0, "resnet18", "infer", "default"), (0, "resnet18", "train", "default")]
    out = io.StringIO()
    p = Progress(4, out=out, plan=plan, load=quiet_host)
    p.done({"status": "ok"}, 12.0, k=1)
    p.start(2, "mlp train")
    assert "about 36s left from the 1 cell done; 3 of them like no cell timed yet (counted as the average cell)" \
        in out.getvalue()
    prior = prior_times([{"model": m, "phase": ph, "mode": "default", "cell_wall_s": 20.0} for _, m, ph, _ in plan])
    out = io.StringIO()
    q = Progress(4, out=out, plan=plan, prior=prior, load=quiet_host)
    q.done({"status": "ok"}, 12.0, k=1)
    q.start(2, "mlp train")
    assert "guessed" not in out.getvalue()  # every model and phase timed in an earlier run


def test_with_no_run_of_this_gpu_the_published_runs_of_another_gpu_stand_in():
    """A clone on a GPU the published runs never saw: their cells (another GPU, the same device type,
    launcher and processes) give the relative costs, which this run's cells scale."""
    import tempfile
    from pathlib import Path
    from types import SimpleNamespace

    from collector.host.earlier import earlier_times

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "runs").mkdir()
        _run(root / "examples", "h200", "NVIDIA H200", 3, 30.0)
        _run(root / "examples", "cpu", "AMD EPYC", 3, 99.0)
        for name, device in (("h200", "cuda"), ("cpu", "cpu")):
            m = json.loads((root / "examples" / name / "run.json").read_text())
            m["environment"]["device"] = device
            (root / "examples" / name / "run.json").write_text(json.dumps(m))
        target = SimpleNamespace(run_id="now", env={"device_name": "NVIDIA A100", "device": "cuda"},
                                 launcher=SimpleNamespace(name="exec"), matrix=SimpleNamespace(protocol=SimpleNamespace(processes=3, cold_replicates=False), cells=[]))
        assert earlier_times(root / "runs", [target])[("cell", "mlp", "infer", "default")] == [30.0]
        target.env["device"] = "xpu"
        assert earlier_times(root / "runs", [target]) == {}


def test_a_runs_folder_elsewhere_still_reads_the_checkouts_published_runs(tmp_path, monkeypatch):
    """RUNS=/tmp/fresh/runs (eta5-h200): no data/examples beside it, so the estimate had no earlier
    run and guessed the ResNet-18 cells from the MLP's (1.70-2.11x low); the checkout's own published
    runs stand in there, after the runs folder's own and those beside it."""
    from types import SimpleNamespace

    import collector.host.earlier
    from collector.host.earlier import earlier_times

    monkeypatch.setattr(collector.host.earlier, "PUBLISHED", tmp_path / "checkout" / "data" / "examples")
    _run(tmp_path / "checkout" / "data" / "examples", "h200", "NVIDIA H200", 3, 30.0)
    runs = tmp_path / "fresh" / "runs"
    runs.mkdir(parents=True)
    target = SimpleNamespace(run_id="now", env={"device_name": "NVIDIA H200", "device": "cuda"},
                             launcher=SimpleNamespace(name="exec"),
                             matrix=SimpleNamespace(protocol=SimpleNamespace(processes=3, cold_replicates=False), cells=[]))
    assert earlier_times(runs, [target])[("cell", "mlp", "infer", "default")] == [30.0]
    _run(tmp_path / "fresh" / "examples", "beside", "NVIDIA H200", 3, 44.0)  # published beside: they first
    assert earlier_times(runs, [target])[("cell", "mlp", "infer", "default")] == [44.0]


def test_a_cold_replicates_run_reads_warm_runs_with_a_cold_compile_in_every_process(tmp_path):
    """eta-cold-h200 (COLD_REPLICATES=1, each of 3 processes compiles cold) read eta6-h200's warm
    cells as they were: 1.5x low at its second cell (ResNet-18 training: 38 s warm, 90 s cold). The
    warm cells now count 2 more cold compiles less warm ones; a warm run leaves cold runs out."""
    from types import SimpleNamespace

    from collector.host.earlier import earlier_times

    for run_id, cold, secs in (("warm", False, 38.0), ("cold", True, 90.0)):
        d = tmp_path / run_id / "cells"
        d.mkdir(parents=True)
        (tmp_path / run_id / "run.json").write_text(json.dumps({
            "environment": {"device_name": "NVIDIA H200"},
            "protocol": {"processes": 3, "cold_replicates": cold},
            "sessions": [{"started_at": f"2026-12-04T0{int(cold)}:00:00+00:00"}]}))
        pq.write_table(pa.table({"model": ["resnet18"], "phase": ["train"], "mode": ["default"],
                                 "cell_wall_s": [secs], "first_call_compiled_s": [22.0],
                                 "warm_first_call_compiled_s": [2.2 if not cold else None]}), d / "c.parquet")

    def target(cold):
        return SimpleNamespace(run_id="now", env={"device_name": "NVIDIA H200"}, launcher=SimpleNamespace(name="exec"),
                               matrix=SimpleNamespace(protocol=SimpleNamespace(processes=3, cold_replicates=cold), cells=[]))
    key = ("cell", "resnet18", "train", "default")
    assert earlier_times(tmp_path, [target(False)])[key] == [38.0]  # the cold run left out
    assert sorted(earlier_times(tmp_path, [target(True)])[key]) == pytest.approx([38.0 + 2 * (22.0 - 2.2), 90.0])
    (tmp_path / "warm" / "run.json").unlink()  # only a cold run there: a warm run still reads it
    assert earlier_times(tmp_path, [target(False)])[key] == [90.0]


def test_a_model_timed_in_one_phase_is_estimated_in_the_other_by_the_other_models_ratio():
    """A new model (a user's, an hf: class) times its inference cells first; its training cells were
    guessed as an average cell (13 min left read as 1m37s): they are its inference time times how much
    longer training takes for the models timed in both phases."""
    plan = [(0, "b", "infer", "default"), (0, "b", "train", "default"), (0, "a", "infer", "default"),
            (0, "a", "train", "default")]
    p = Progress(4, out=io.StringIO(), plan=plan, load=lambda: None)
    for k, secs in ((1, 20.0), (2, 60.0), (3, 10.0)):
        p.done({"status": "ok"}, secs, k=k)
    assert p.estimate_left(4) == pytest.approx(30.0) and p.guessed == 0  # a's 10 s x (60 / 20)


def test_the_estimate_follows_the_hosts_load_now_against_its_load_when_the_cells_ran():
    """A host that got busier (another job on the 2-core machine: 8m13s estimated for 12m14s) stretches
    what is left by how much less CPU a process gets; under one process per CPU nothing changes; the
    line says so in words."""
    load = [1.0]
    plan = [(0, "a", "infer", "default")] * 4
    out = io.StringIO()
    p = Progress(4, out=out, plan=plan, load=lambda: load[0])
    p.done({"status": "ok"}, 10.0, k=1)
    assert p.estimate_left(2) == pytest.approx(30.0)
    load[0] = 2.0  # twice as many runnable processes as CPUs
    p.start(2, "a infer")
    assert "about 1m00s left from the 1 cell done; the host busier now than then: x2.00" in out.getvalue()
    load[0] = 0.4  # quieter than one process per CPU: no faster than uncrowded
    assert p.estimate_left(2) == pytest.approx(30.0)


def test_an_earlier_run_collected_on_a_crowded_host_is_read_as_uncrowded_and_scaled_to_the_load_now(tmp_path):
    """benchmarks/eta_under_load.sh's third run (quiet) read the second (two busy processes beside it
    on 2 cores) as it was: 1.93x high at its first cell. A session records the host's mean crowding as
    its cells ended (run.json `host_crowding`); a later run divides those cells' times by it, and the
    live pace scales them to the load now."""
    from types import SimpleNamespace

    from collector.host.earlier import earlier_times

    d = tmp_path / "loaded" / "cells"
    d.mkdir(parents=True)
    (tmp_path / "loaded" / "run.json").write_text(json.dumps({
        "environment": {"device_name": "cpu"}, "protocol": {"processes": 3},
        "sessions": [{"started_at": "2026-12-05T01:00:00+00:00", "finished_at": "2026-12-05T01:10:00+00:00",
                      "host_crowding": 2.0},
                     {"started_at": "2026-12-05T02:00:00+00:00", "finished_at": "2026-12-05T02:10:00+00:00"}]}))
    pq.write_table(pa.table({"model": ["mlp", "gpt"], "phase": ["infer", "infer"], "mode": ["default"] * 2,
                             "cell_wall_s": [40.0, 30.0],
                             "started_at": ["2026-12-05T01:05:00+00:00", "2026-12-05T02:05:00+00:00"]}),
                   d / "c.parquet")
    target = SimpleNamespace(run_id="now", env={"device_name": "cpu"}, launcher=SimpleNamespace(name="exec"),
                             matrix=SimpleNamespace(protocol=SimpleNamespace(processes=3, cold_replicates=False),
                                                    cells=[]))
    got = earlier_times(tmp_path, [target])
    assert got[("cell", "mlp", "infer", "default")] == [20.0]  # crowded 2x: half its time uncrowded
    assert got[("cell", "gpt", "infer", "default")] == [30.0]  # a session that recorded none: as it was

    load = [2.0]
    p = Progress(1, out=io.StringIO(), plan=[(0, "mlp", "infer", "default")], prior=got, load=lambda: load[0])
    assert p.estimate_left(1) == pytest.approx(40.0)  # busy now as then: the time it took then
    load[0] = 0.5
    assert p.estimate_left(1) == pytest.approx(20.0)
    p.done({"status": "ok"}, 21.0, k=1)
    load[0] = 3.0
    p.done({"status": "ok"}, 60.0, k=1)
    assert p.crowding_seen() == pytest.approx(2.0)  # what this session's run.json records


def test_a_model_whose_cells_compare_apart_from_the_rest_is_scaled_by_its_own():
    """The smoke preset's GPT cells took 45 s (inference) and 120 s (training) in the runs of
    2026-11-30, today 27 s and 61 s, while the MLP cells took today's: one scale for both read the GPT's
    training 1.6-1.7x high (benchmarks/eta_under_load.sh, q1). Once this run's GPT inference cell is
    timed, the GPT's own ratio (0.6) scales its training; a model within MODEL_APART of the rest keeps
    the run's scale."""
    prior = prior_times([{"model": m, "phase": ph, "mode": "default", "cell_wall_s": s}
                         for m, ph, s in (("mlp", "infer", 20.0), ("gpt", "infer", 45.0), ("gpt", "train", 120.0),
                                          ("cnn", "infer", 30.0), ("cnn", "train", 50.0))])
    plan = [(0, "mlp", "infer", "default"), (0, "gpt", "infer", "default"), (0, "cnn", "infer", "default"),
            (0, "gpt", "train", "default"), (0, "cnn", "train", "default")]
    p = Progress(5, out=io.StringIO(), plan=plan, prior=prior, load=quiet_host)
    p.done({"status": "ok", "model": "mlp"}, 20.0, k=1, label=None)
    p.seen.setdefault(("cell", "mlp", "infer", "default"), [20.0])
    p.seen[("cell", "gpt", "infer", "default")] = [27.0]
    p.seen[("cell", "cnn", "infer", "default")] = [28.0]  # 0.93x: within MODEL_APART of the run's 0.82x
    scales = p._scale()
    scale, by_model = scales[:2]
    assert by_model["gpt"] == pytest.approx(0.6)
    assert p._one((0, "gpt", "train", "default"), 10.0, scales)[0] == pytest.approx(72.0)
    assert p._one((0, "cnn", "train", "default"), 10.0, scales)[0] == pytest.approx(50.0 * scale)


def test_each_earlier_run_is_scaled_by_its_own_cells_where_it_shares_one_with_this_run():
    """The smoke preset's GPT training cells are in one run of 2026-11-30 only, slower then than the
    newer runs: read through one scale for all, the GPT's training came out 1.5-1.9x high
    (benchmarks/eta_under_load.sh, q1). Each earlier run that shares a finished cell is scaled by its
    own ratio (here an old run at 23/17 of this run's pace)."""
    rows = [{"model": "mlp", "phase": "infer", "mode": "default", "cell_wall_s": 23.0, "run": "old"},
            {"model": "gpt", "phase": "train", "mode": "default", "cell_wall_s": 120.0, "run": "old"}]
    rows += [{"model": "mlp", "phase": "infer", "mode": "default", "cell_wall_s": 17.0, "run": f"new{i}"}
             for i in range(4)]
    prior = prior_times(rows)
    plan = [(0, "mlp", "infer", "default"), (0, "gpt", "train", "default")]
    p = Progress(2, out=io.StringIO(), plan=plan, prior=prior, load=quiet_host)
    p.done({"status": "ok"}, 17.0, k=1)
    scales = p._scale()
    assert scales[2]["old"] == pytest.approx(17.0 / 23.0) and scales[2]["new0"] == pytest.approx(1.0)
    # its own run's 17/23, where one scale for all would read 120 x 17/18.2 (the mean of every run's MLP cell)
    assert p.estimate_left(2) == pytest.approx(120.0 * 17.0 / 23.0)


def test_a_cell_slows_on_a_crowded_host_by_the_share_of_the_cpus_it_keeps_busy():
    """Beside two busy processes on 2 cores (crowding 1.71) the smoke MLP's inference (1.2 threads busy
    when quiet) slowed 1.04-1.42x and the one-layer GPT's training (1.8 threads) 3.1-3.3x: a crowded
    host slows most the cells that keep most CPUs busy (docs/estimate.md)."""
    from collector.host.hostload import LOAD_EXPONENT, LOAD_FLOOR, busy_threads, slowdown

    assert slowdown(0.7, 1.8, cpus=2) == slowdown(1.0, 1.8, cpus=2) == 1.0  # no CPU oversubscribed
    assert slowdown(2.0, None, cpus=2) == 2.0  # not known: a process's share of a CPU
    assert slowdown(2.0, 1.0, cpus=2) == slowdown(2.0, 0.5, cpus=2) == pytest.approx(2.0 ** LOAD_FLOOR)
    assert slowdown(2.0, 2.0, cpus=2) == slowdown(2.0, 9.0, cpus=2) == pytest.approx(2.0 ** (LOAD_FLOOR + LOAD_EXPONENT))
    assert 1.5 < slowdown(1.71, 1.17, cpus=2) < 1.9 and 2.6 < slowdown(1.71, 1.77, cpus=2) < 3.3
    assert slowdown(1.71, 1.77, cpus=16) < 1.71  # 1.8 threads of 16 CPUs: about a process's share
    assert busy_threads({"process_cpu_s": [20.0, 10.0, None], "process_wall_s": [14.0, 6.0, 6.0]}) == 1.5
    assert busy_threads({"process_wall_s": [14.0]}) is None  # a row before schema v12


# the smoke preset on the 2-core machine, quiet then beside two busy processes (2026-12-05: each cell's
# processes' wall seconds, quiet and loaded, and the threads it kept busy quiet), in the preset's order
SMOKE = [(("mlp", "infer", "default"), 21.2, 30.2, 1.17), (("mlp", "infer", "reduce-overhead"), 15.6, 16.3, 1.22),
         (("mlp", "train", "default"), 17.7, 46.4, 1.29), (("mlp", "train", "reduce-overhead"), 16.5, 43.5, 1.29),
         (("gpt", "infer", "default"), 26.5, 64.3, 1.55), (("gpt", "infer", "reduce-overhead"), 27.0, 64.0, 1.54),
         (("gpt", "train", "default"), 58.7, 190.3, 1.77), (("gpt", "train", "reduce-overhead"), 62.3, 205.4, 1.77)]


def test_under_load_the_estimate_stretches_each_cell_by_the_threads_it_keeps_busy():
    """The loaded run of benchmarks/eta_under_load.sh, replayed from its measured cells: at the second
    cell the one cell done (the MLP's inference, 1.42x its quiet time) was carried to all seven left, and
    the estimate was 2x low (0.42-0.50) since the GPT's cells slow 2.4-3.3x. Stretched each by its own
    busy threads, it is within 1.5x from the second cell on; a quiet run after it reads the loaded run's
    cells as quiet ones (within 1.5x too)."""
    quiet = prior_times([{"model": m, "phase": ph, "mode": mo, "cell_wall_s": q, "process_cpu_s": [u * q],
                          "process_wall_s": [q], "run": "q1"} for (m, ph, mo), q, _, u in SMOKE])
    plan = [(0,) + key for key, *_ in SMOKE]
    p = Progress(8, out=io.StringIO(), plan=plan, prior=quiet, load=lambda: 1.71, cpus=2)
    for k, (key, _, loaded, _) in enumerate(SMOKE, 1):
        left = sum(x[2] for x in SMOKE[k - 1:])
        if k > 1:
            assert 1 / 1.5 < p.estimate_left(k) / left < 1.5, k
        p.done({"status": "ok"}, loaded, k=k)

    # a quiet run after both, reading them (the loaded one's session: host_crowding 1.71)
    from collector.host.hostload import uncrowd

    def rows(busy):
        cpu = (lambda u, secs: {"process_cpu_s": [u * secs], "process_wall_s": [secs]}) if busy else (lambda u, secs: {})
        return ([{"model": m, "phase": ph, "mode": mo, "cell_wall_s": lo, "crowd": 1.71, "run": "l2",
                  **cpu(0.96, lo)} for (m, ph, mo), _, lo, _ in SMOKE] +
                [{"model": m, "phase": ph, "mode": mo, "cell_wall_s": q, "run": "q1", **cpu(u, q)}
                 for (m, ph, mo), q, _, u in SMOKE])

    def worst(busy):
        p = Progress(8, out=io.StringIO(), plan=plan, prior=prior_times(uncrowd(rows(busy), cpus=2)),
                     load=lambda: 0.5, cpus=2)
        got = []
        for k, (key, q, _, _) in enumerate(SMOKE, 1):
            if k > 1:
                est = p.estimate_left(k) / sum(x[1] for x in SMOKE[k - 1:])
                got.append(max(est, 1 / est))
            p.done({"status": "ok"}, q, k=k)
        return max(got)

    assert worst(True) < 1.5
    assert worst(False) > 1.5  # the loaded run divided by its crowding alone


def test_an_older_runs_cells_that_no_newer_run_timed_follow_the_newer_runs_pace_of_the_model():
    """The smoke preset's GPT training is in one published CPU run only (2026-11-30: 117-123 s, the
    machine now takes 61 s), whose GPT inference took 45 s where later runs took 31-36 s: a quiet run
    read it as it was and its estimate was 1.4-1.6x high until its own GPT cells ran. The older run's
    cells no newer run timed follow the newer runs' pace of the model; the cells both timed stay."""
    from collector.host.earlier import follow_newest

    rows = [{"model": "gpt", "phase": "infer", "mode": "default", "cell_wall_s": 33.0, "run": "new"},
            {"model": "mlp", "phase": "infer", "mode": "default", "cell_wall_s": 20.0, "run": "new"},
            {"model": "gpt", "phase": "infer", "mode": "default", "cell_wall_s": 45.0, "run": "old"},
            {"model": "gpt", "phase": "train", "mode": "default", "cell_wall_s": 120.0, "run": "old",
             "startup_s": 10.0},
            {"model": "mlp", "phase": "train", "mode": "default", "cell_wall_s": 18.0, "run": "old"}]
    got = {(r["run"], r["model"], r["phase"]): r["cell_wall_s"] for r in follow_newest(rows)}
    assert got[("old", "gpt", "infer")] == 45.0 and got[("new", "gpt", "infer")] == 33.0  # both timed: as they were
    assert got[("old", "gpt", "train")] == pytest.approx(10.0 + 110.0 * 33 / 45)  # the start left as it was
    assert got[("old", "mlp", "train")] == 18.0  # no newer run timed the MLP's cells in that run


def test_the_host_load_is_the_runnable_threads_of_the_last_30_s_not_the_minutes_average():
    """Two busy processes started a minute before a run had lifted the kernel's one-minute load average
    to 63% of their load, so the run read its first cells as a quiet host's. The sampler's mean is of
    the last `window` seconds of runnable threads (less the reader), per CPU, from its first call on."""
    from collector.host.hostload import LoadSampler, _runnable

    counts, now = iter([4] * 10 + [0] * 40), [0.0]
    s = LoadSampler(read=lambda: next(counts), window=30.0, burst=10, clock=lambda: now[0], cpus=2,
                    background=False)
    assert s() == pytest.approx(4 / 2)  # the first call's burst: 4 runnable threads on 2 CPUs
    for _ in range(35):
        now[0] += 1.0
        s.sample()
    assert s() == 0.0  # the busy samples are older than the window
    assert LoadSampler(read=lambda: None, burst=3, background=False)() is None  # nothing to read: the caller falls back
    got = _runnable()
    assert got is None or got >= 0


def test_a_quiet_runs_slight_crowding_still_gives_its_cells_busy_threads():
    """The 30 s sampler counts the collector's own threads: quiet runs' sessions read 1.002 and 1.008,
    and the estimate lost every quiet cell's busy threads while it took any crowding above 1 as a
    crowded host. Up to UNCROWDED a host is uncrowded; above it, it is not."""
    from collector.host.hostload import UNCROWDED, mark_crowding, uncrowd

    sessions = [{"started_at": "a", "finished_at": "z", "host_crowding": 1.008}]
    row = {"model": "gpt", "phase": "train", "mode": "default", "cell_wall_s": 60.0, "started_at": "m",
           "process_cpu_s": [105.0], "process_wall_s": [60.0]}
    got = prior_times(uncrowd(mark_crowding([dict(row)], sessions), cpus=2))[("cell", "gpt", "train", "default")]
    assert got == [60.0] and got[0].busy == pytest.approx(1.75)
    sessions[0]["host_crowding"] = UNCROWDED + 0.5
    got = prior_times(uncrowd(mark_crowding([dict(row)], sessions), cpus=2))[("cell", "gpt", "train", "default")]
    # crowded, and no uncrowded run of the cell to say its threads: read back by the crowding alone
    assert got[0].busy is None and got[0] == pytest.approx(60.0 / (UNCROWDED + 0.5))
