"""The fork launcher (collector/host/zygote.py, launch.ForkLauncher): results, logs, timeouts,
crashes, a dying parent, refused environments and leaked caches fall back to exec with a reason;
and the real path (a smoke cell with torch and Inductor) through it."""
import os
import sys
import time
from pathlib import Path

import pytest

from collector.host.launch import ForkLauncher, SubprocessLauncher

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="fork launcher: Linux")


@pytest.fixture
def launcher():
    lnch = ForkLauncher(sys.executable, preload="json")  # a light parent: no torch import in these tests
    lnch.module = "tests.zygote_target"
    yield lnch
    lnch.close()


def _run(lnch, tmp_path, spec, timeout=60, name="c"):
    cache = tmp_path / f"cache-{name}"
    cache.mkdir(exist_ok=True)
    (tmp_path / "logs").mkdir(exist_ok=True)
    log = tmp_path / "logs" / f"{name}.log"
    return lnch.run(spec, cache, log, timeout), log


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_forked_processes_come_from_one_parent_with_their_own_cache(launcher, tmp_path):
    a, log = _run(launcher, tmp_path, {"action": "ok"})
    b, _ = _run(launcher, tmp_path, {"action": "ok"}, name="d")
    assert a["status"] == b["status"] == "ok"
    assert a["ppid"] == b["ppid"] == launcher.parent.pid  # forked by the parent, not exec'd by us
    assert a["pid"] != b["pid"]
    assert a["cache"] == str(tmp_path / "cache-c" / "inductor")  # the request's cache, not the parent's
    assert b["cache"] == str(tmp_path / "cache-d" / "inductor")
    assert a["modules"] == ["json"]  # the parent's preload is there without importing it again
    text = log.read_text()
    assert "cold (forked) ===" in text and "action ok" in text  # the child's output reaches the log
    assert launcher.describe() == {"launcher": "fork", "forked_processes": 2, "execed_processes": 0,
                                   "parent_import_s": launcher.import_s, "parent_modules": ["json"],
                                   "parent_first_refusal": None, "fallback": None}


@pytest.mark.slow
def test_a_hung_forked_process_times_out_and_its_whole_group_dies(launcher, tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    t0 = time.monotonic()
    got, log = _run(launcher, tmp_path, {"action": "hang", "pidfile": str(pidfile)}, timeout=3)
    assert got["status"] == "timeout" and time.monotonic() - t0 < 30
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild)
    again, _ = _run(launcher, tmp_path, {"action": "ok"}, name="e")  # the parent serves the next one
    assert again["status"] == "ok" and launcher.describe()["forked_processes"] == 2


def test_a_crashing_forked_process_is_a_crashed_row_with_its_signal(launcher, tmp_path):
    got, _ = _run(launcher, tmp_path, {"action": "segv"})
    assert got["status"] == "crashed" and "SIGSEGV" in got["error"]


def test_a_dead_parent_costs_one_process_then_exec_takes_over(launcher, tmp_path):
    got, _ = _run(launcher, tmp_path, {"action": "kill-parent"})
    assert got["status"] == "crashed" and "SIGKILL" in got["error"]
    again, log = _run(launcher, tmp_path, {"action": "ok"}, name="e")
    assert again["status"] == "ok" and again["ppid"] == os.getpid()  # exec'd by this process
    assert "fork parent" in launcher.describe()["fallback"]
    assert launcher.describe()["execed_processes"] == 1


def test_an_environment_the_parent_cannot_give_is_refused_and_execed(launcher, tmp_path, monkeypatch):
    _run(launcher, tmp_path, {"action": "ok"})  # the parent starts with this environment
    monkeypatch.setenv("TORCHINDUCTOR_MAX_AUTOTUNE", "1")  # torch reads it at import: a fork would not see it
    got, _ = _run(launcher, tmp_path, {"action": "ok"}, name="e")
    assert got["status"] == "ok" and got["ppid"] == os.getpid()
    assert "TORCHINDUCTOR_MAX_AUTOTUNE" in launcher.describe()["fallback"]


def test_a_process_that_writes_into_the_parents_cache_is_measured_again_by_exec(launcher, tmp_path):
    _run(launcher, tmp_path, {"action": "ok"})
    got, log = _run(launcher, tmp_path, {"action": "leak", "path": str(launcher.sentinel / "inductor")}, name="e")
    assert got["status"] == "ok" and got["ppid"] == os.getpid()  # the forked result was discarded
    assert "compile cache" in launcher.describe()["fallback"]
    assert log.read_text().count("=== ") == 2  # the forked attempt and the exec'd one are both logged


def test_a_parent_that_cannot_start_leaves_exec(tmp_path):
    lnch = ForkLauncher(sys.executable, preload="no_such_module_anywhere")
    lnch.module = "tests.zygote_target"
    try:
        got, _ = _run(lnch, tmp_path, {"action": "ok"})
        assert got["status"] == "ok" and got["ppid"] == os.getpid()
        assert "no_such_module_anywhere" in lnch.describe()["fallback"]
        assert "launcher.log" in lnch.describe()["fallback"]
    finally:
        lnch.close()


def test_a_refused_parent_is_replaced_once_by_its_retry_preload(tmp_path):
    """As a CUDA parent whose Inductor import reached the driver: the second parent (without it) serves."""
    lnch = ForkLauncher(sys.executable, preload="json,no_such_module_anywhere")
    lnch.module, lnch.retry_preload = "tests.zygote_target", "json"
    try:
        got, _ = _run(lnch, tmp_path, {"action": "ok"})
        assert got["status"] == "ok" and got["ppid"] == lnch.parent.pid and got["modules"] == ["json"]
        d = lnch.describe()
        assert d["fallback"] is None and d["forked_processes"] == 1 and d["parent_modules"] == ["json"]
        assert "no_such_module_anywhere" in d["parent_first_refusal"]
        assert (tmp_path / "logs" / "launcher.log").read_text().count("=== ") == 2  # both parents logged
        twin = lnch.for_worker(lnch.worker)
        assert twin.retry_preload == "json"
        twin.close()
    finally:
        lnch.close()


def test_cuda_questions_during_the_imports_get_the_probes_answers():
    """A CUDA parent answers torch.cuda.is_available()/device_count() from its probe child while it
    imports (nothing asks NVML, which starts a driver thread), and puts torch's own back after."""
    torch = pytest.importorskip("torch")
    from collector.host import zygote

    real_available, real_count = torch.cuda.is_available, torch.cuda.device_count
    before = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    with zygote._no_cuda_driver(True) as guard:
        guard.answer(2)
        assert torch.cuda.is_available() is True and torch.cuda.device_count() == 2
        guard.answer(0)
        assert torch.cuda.is_available() is False and torch.cuda.device_count() == 0
        assert guard.touched == []
    assert torch.cuda.is_available is real_available and torch.cuda.device_count is real_count
    assert os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") == before


def test_a_cuda_parent_without_a_usable_gpu_execs_without_a_second_parent(tmp_path):
    """The CUDA probe runs right after `import torch`, before the rest of the preload: where CUDA
    cannot start in a forked child (this machine), the parent says so at once and exec takes over;
    a parent without Inductor would not help, so none is started."""
    pytest.importorskip("torch")
    lnch = ForkLauncher(sys.executable, device="cuda")
    lnch.module = "tests.zygote_target"
    try:
        got, _ = _run(lnch, tmp_path, {"action": "ok"})
        assert got["status"] == "ok" and got["ppid"] == os.getpid()
        d = lnch.describe()
        assert "CUDA did not start in a forked child" in d["fallback"] and d["parent_first_refusal"] is None
        log = (tmp_path / "logs" / "launcher.log").read_text()
        assert log.count("fork parent ===") == 1 and "imported" not in log  # the rest was not imported
    finally:
        lnch.close()


def test_the_exec_launcher_runs_the_same_target(tmp_path):
    lnch = SubprocessLauncher(sys.executable)
    lnch.module = "tests.zygote_target"
    got, log = _run(lnch, tmp_path, {"action": "ok"})
    assert got["status"] == "ok" and got["ppid"] == os.getpid() and "(forked)" not in log.read_text()


@pytest.mark.compile
def test_real_cell_through_the_fork_launcher(tmp_path):
    """The real path: torch and Inductor preloaded, three forked processes of one smoke cell, each
    compiling into the cell's own cache (the cold one from empty) and none into the parent's; then
    the same cell with COLD_REPLICATES=1, whose replicate compiles cold in an empty cache of its own."""
    pytest.importorskip("torch")
    from collector.plan import matrix as mx
    from collector.host.cell_measure import measure_cell

    m = mx.build_matrix("smoke", {"models": ["mlp"], "phases": ["infer"], "modes": ["default"], "blocks": 2})
    env = {"device": "cpu", "device_name": "cpu", "torch_version": "x", "hostname": "h"}
    lnch = ForkLauncher(sys.executable, device="cpu")
    (tmp_path / "logs").mkdir()
    try:
        row = measure_cell(m.cells[0], m, env, "r", tmp_path, lnch)
        assert row["status"] == "ok", row["error"]
        assert row["processes"] == 3 and len(row["eager_step_ms"]) == len(row["compiled_step_ms"])
        assert row["cache_inductor_bytes"] > 0  # the cold process compiled into the cell's cache
        assert row["first_call_compiled_s"] > 3 * row["warm_first_call_compiled_s"]  # cold, then warm
        assert lnch.describe()["forked_processes"] == 3 and lnch.describe()["fallback"] is None
        assert not any(p.is_file() for p in lnch.sentinel.rglob("*"))
        log = (tmp_path / "logs" / f"{m.cells[0].cell_id}.log").read_text()
        assert log.count("(forked) ===") == 3 and "RuntimeWarning" not in log
        # a CPU parent preloads Inductor too, so the children's torch.compile() imports nothing
        assert "torch._inductor.compile_fx in" in (tmp_path / "logs" / "launcher.log").read_text()
        # COLD_REPLICATES=1 on the same parent: the replicate compiles cold in an empty cache of its own
        # (on this machine 11.2 s against the cold process's 14.2 s, a warm-cache replicate 1.7 s)
        cold = mx.build_matrix("smoke", {"models": ["mlp"], "phases": ["infer"], "modes": ["default"], "blocks": 2,
                                         "processes": 2, "cold_replicates": True})
        row = measure_cell(cold.cells[0], cold, env, "r", tmp_path, lnch)
        assert row["status"] == "ok" and row["replicate_cache"] == "cold" and row["processes"] == 2
        first, rep = row["process_first_call_compiled_s"]
        assert rep > 0.4 * first, (first, rep)  # a warm-cache replicate: above, under a third of the cold one
        assert row["warm_first_call_compiled_s"] is None
        # each child's log names the cache it found, not its role: the replicate's was empty this time
        log = (tmp_path / "logs" / f"{m.cells[0].cell_id}.log").read_text()
        assert log.count("(cold cache)") == 3 and log.count("(warm cache)") == 2
    finally:
        lnch.close()
