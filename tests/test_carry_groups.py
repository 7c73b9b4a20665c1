"""benchmarks/gpu_machine/carry_groups.py: the pieces of several torch stacks grouped for the GPU machine's carry
limit, a shared wheel's pieces once, each version's manifest with the last group."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("carry_groups", ROOT / "benchmarks" / "gpu_machine" / "carry_groups.py")
carry_groups = importlib.util.module_from_spec(spec)
spec.loader.exec_module(carry_groups)


def stack(whl: Path, version: str, wheels: dict[str, list[int]]) -> None:
    d = whl / f"torch-{version}"
    d.mkdir(parents=True)
    for name, sizes in wheels.items():
        for i, n in enumerate(sizes):
            (d / f"{name}.part{i:02d}").write_bytes(b"x" * n)
    (d / "MANIFEST").write_text("".join(f"0123 {name}\n" for name in wheels))


def test_groups_fit_the_limit_and_a_shared_wheel_travels_once(tmp_path, capsys):
    whl, out = tmp_path / ".whl", tmp_path / ".carry"
    shared = {"nccl-2.32.3.whl": [30, 30, 7]}
    stack(whl, "2.12.1", {"torch-2.12.1.whl": [30, 30, 30, 11], **shared})
    stack(whl, "2.14.1", {"torch-2.14.1.whl": [30, 30, 5], **shared})
    assert carry_groups.main(["2.12.1", "2.14.1", "--whl", str(whl), "--out", str(out), "--limit", "60"]) == 0
    listed = capsys.readouterr().out.split()
    groups = sorted(out.iterdir())
    assert [str(g) for g in groups] == listed
    pieces = [f.name for g in groups for f in g.iterdir() if ".part" in f.name]
    assert len(pieces) == len(set(pieces)) == 4 + 3 + 3  # the shared NCCL pieces once
    for g in groups:
        assert sum(f.stat().st_size for f in g.iterdir() if ".part" in f.name) <= 60
    assert len(groups) == 4  # 233 bytes of pieces, at most 60 a group: the fewest calls that can carry them
    last = sorted(f.name for f in groups[-1].iterdir() if "MANIFEST" in f.name)
    assert last == ["MANIFEST-2.12.1", "MANIFEST-2.14.1"]
    assert (groups[-1] / "MANIFEST-2.14.1").read_text() == (whl / "torch-2.14.1" / "MANIFEST").read_text()


def test_a_missing_download_or_piece_is_named(tmp_path):
    whl = tmp_path / ".whl"
    with pytest.raises(SystemExit, match=r"no .*torch-2.13.0/MANIFEST: run `bash benchmarks/gpu_machine/torch-stack download 2.13.0`"):
        carry_groups.main(["2.13.0", "--whl", str(whl), "--out", str(tmp_path / ".carry")])
    stack(whl, "2.12.1", {"torch-2.12.1.whl": [10]})
    (whl / "torch-2.12.1" / "MANIFEST").write_text("0123 torch-2.12.1.whl\n0456 triton.whl\n")
    with pytest.raises(SystemExit, match="has no pieces of triton.whl"):
        carry_groups.main(["2.12.1", "--whl", str(whl), "--out", str(tmp_path / ".carry")])
    stack(whl, "2.14.1", {"torch-2.14.1.whl": [70]})
    with pytest.raises(SystemExit, match="more than the 60-byte limit"):
        carry_groups.main(["2.14.1", "--whl", str(whl), "--out", str(tmp_path / ".carry"), "--limit", "60"])


def test_runs_travel_without_old_logs_both_ways_and_a_machines_own_files_stay(tmp_path):
    """versions_gpu.sh, the real script: `carry-runs` here packs data/runs without its logs; a stage
    there unpacks that first, keeping the files the machine already has, and its $OUT/runs.tgz holds
    every row, manifest and preset but only the logs written during the command."""
    import subprocess
    import tarfile

    script = ROOT / "benchmarks" / "gpu_machine" / "versions_gpu.sh"
    here, there = tmp_path / "here", tmp_path / "there"
    for d, row in ((here, b"row measured"), (there, b"row the machine has")):
        (d / "data" / "runs" / "r-a" / "cells").mkdir(parents=True)
        (d / "data" / "runs" / "r-a" / "logs").mkdir()
        (d / "data" / "runs" / "r-a" / "cells" / "c1.parquet").write_bytes(row)
        (d / "data" / "runs" / "r-a" / "logs" / "c1.log").write_text("an earlier command's log\n")
    (here / "data" / "runs" / "r-a" / "run.json").write_text("{}")
    (here / "data" / "runs" / "r-a" / "cells" / "c2.parquet").write_bytes(b"another row")
    (here / "data" / "runs" / "rc.toml").write_text("cells = []\n")
    made = subprocess.run(["bash", str(script), "carry-runs"], cwd=here, capture_output=True, text=True)
    assert made.returncode == 0 and "carry .carry/runs" in made.stdout, made.stderr
    with tarfile.open(here / ".carry" / "runs" / "runs.tgz") as t:
        carried = set(t.getnames())
    assert {"data/runs/r-a/cells/c1.parquet", "data/runs/r-a/cells/c2.parquet", "data/runs/r-a/run.json",
            "data/runs/rc.toml"} <= carried and not any("/logs" in n for n in carried), carried

    # there: a stand-in `make` writes a new cell and its log, as `make collect` would, during the stage
    (there / ".carry").mkdir()
    (here / ".carry" / "runs").rename(there / ".carry" / "runs")
    bin_dir, out = tmp_path / "bin", tmp_path / "out"
    bin_dir.mkdir(), out.mkdir()
    (bin_dir / "make").write_text("#!/bin/sh\necho row > data/runs/r-a/cells/c3.parquet\n"
                                  "echo log > data/runs/r-a/logs/c3.log\n")
    (bin_dir / "make").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "OUT": str(out)}
    ran = subprocess.run(["bash", str(script), "release", "r", "60", "a=python3"], cwd=there, env=env,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and "runs carried in: r-a rc.toml" in ran.stdout, (ran.stdout, ran.stderr)
    assert (there / "data" / "runs" / "r-a" / "cells" / "c1.parquet").read_bytes() == b"row the machine has"
    with tarfile.open(out / "runs.tgz") as t:
        back = set(t.getnames())
    assert back == {"data/runs/r-a/cells/c1.parquet", "data/runs/r-a/cells/c2.parquet",
                    "data/runs/r-a/cells/c3.parquet", "data/runs/r-a/run.json", "data/runs/rc.toml",
                    "data/runs/r-a/logs/c3.log"}, back


def test_carry_runs_takes_a_pass_committed_under_data_examples_and_keeps_what_data_runs_has(tmp_path):
    """`carry-runs 'su-x-*'`: a pass an earlier clone committed resumes from a fresh one; a run data/runs
    already holds (measured further here) is not replaced; a name that matches nothing is an error."""
    import subprocess
    import tarfile

    script = ROOT / "benchmarks" / "gpu_machine" / "versions_gpu.sh"
    for r in ("su-x-a", "su-x-b"):
        (tmp_path / "data" / "examples" / r / "cells").mkdir(parents=True)
        (tmp_path / "data" / "examples" / r / "run.json").write_text("{}")
        (tmp_path / "data" / "examples" / r / "cells" / "c1.parquet").write_bytes(b"committed")
    (tmp_path / "data" / "runs" / "su-x-b" / "cells").mkdir(parents=True)
    (tmp_path / "data" / "runs" / "su-x-b" / "cells" / "c1.parquet").write_bytes(b"measured further")
    made = subprocess.run(["bash", str(script), "carry-runs", "su-x-*"], cwd=tmp_path, capture_output=True, text=True)
    assert made.returncode == 0 and "from data/examples: su-x-a" in made.stdout and "su-x-b" not in made.stdout, made
    with tarfile.open(tmp_path / ".carry" / "runs" / "runs.tgz") as t:
        got = {n: t.extractfile(n).read() for n in t.getnames() if n.endswith(".parquet")}
    assert got == {"data/runs/su-x-a/cells/c1.parquet": b"committed",
                   "data/runs/su-x-b/cells/c1.parquet": b"measured further"}, got
    bad = subprocess.run(["bash", str(script), "carry-runs", "su-y-*"], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode == 2 and "no run 'su-y-*' in data/examples or data/runs" in bad.stderr, bad


def _suites_stand_ins(bin_dir: Path) -> None:
    """Stand-ins for versions_gpu.sh suites: `make` records its arguments and GPUS, and a screen's writes one
    cell under each interpreter's run; `python3` answers the label, the matrix's size,
    the cells still to be measured alone (PENDING, default 0; its arguments in pending.txt) and `analysis
    confirm` (its arguments in confirm.txt) writes the confirmation's preset; `newpy` is the other interpreter."""
    (bin_dir / "make").write_text(
        "#!/bin/bash\necho \"GPUS_ENV=${GPUS:-} ARGS=$*\" >> calls.txt\n"
        "case \"$*\" in *RUN=su\\ *) for l in torchA torchB; do mkdir -p data/runs/su-$l/cells; "
        "touch data/runs/su-$l/cells/c1.parquet; done;; esac\n")
    (bin_dir / "python3").write_text(
        "#!/bin/bash\ncase \"$*\" in -c*) echo torchA;; *collector*) echo '1 cells';;\n"
        "  *pending_alone*) echo \"$*\" >> pending.txt; echo ${PENDING:-0};;\n"
        "  *confirm*) echo \"$*\" >> confirm.txt; echo 'cells = [\"new\"]' > data/runs/${CONFIRM_RUN:-suc}.toml;; esac\n")
    (bin_dir / "newpy").write_text("#!/bin/bash\necho torchB\n")
    for f in ("make", "python3", "newpy"):
        (bin_dir / f).chmod(0o755)


def test_a_suites_screen_may_take_turns_and_its_confirmation_measures_alone(tmp_path):
    """versions_gpu.sh suites, the real script with stand-in `make` and interpreters: the screen's
    `make collect` reads GPUS=0,0,0 from the environment; the confirmation's is given `GPUS=` (a cell
    alone on the GPU), whatever the screen took."""
    import subprocess

    script = ROOT / "benchmarks" / "gpu_machine" / "versions_gpu.sh"
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir(), (work / "data" / "runs").mkdir(parents=True)
    _suites_stand_ins(bin_dir)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "GPUS": "0,0,0", "NEW": str(bin_dir / "newpy")}
    ran = subprocess.run(["bash", str(script), "suites", "su", "600"], cwd=work, env=env, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, (ran.stdout, ran.stderr)
    calls = (work / "calls.txt").read_text().splitlines()
    assert len(calls) == 2, calls
    screen, confirm = calls
    assert "RUN=su " in screen and "GPUS_ENV=0,0,0" in screen and " GPUS=" not in screen, screen
    assert "RUN=suc " in confirm and " GPUS=" in confirm.split("ARGS=")[1] + " ", confirm


def test_a_confirmation_begun_on_another_machine_resumes_from_its_committed_preset(tmp_path):
    """versions_gpu.sh suites on a fresh machine: where data/runs lacks the confirmation's preset and
    benchmarks/gpu_machine/<RUN>c.toml holds it (committed when the confirmation began), the command
    resumes that preset rather than writing another from the screen (whose cells would differ); with
    neither, `analysis confirm` writes it, given AFTER= and CONFIRM_RUN= for a second confirmation."""
    import subprocess

    script = ROOT / "benchmarks" / "gpu_machine" / "versions_gpu.sh"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _suites_stand_ins(bin_dir)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "NEW": str(bin_dir / "newpy")}
    committed = tmp_path / "a" / "benchmarks" / "gpu_machine"
    committed.mkdir(parents=True), (tmp_path / "a" / "data" / "runs").mkdir(parents=True)
    (committed / "suc.toml").write_text('cells = ["committed"]\n')
    for work, more in ((tmp_path / "a", {}), (tmp_path / "b", {"CONFIRM_RUN": "suc2", "AFTER": "suc"})):
        (work / "data" / "runs").mkdir(parents=True, exist_ok=True)
        ran = subprocess.run(["bash", str(script), "suites", "su", "600"], cwd=work, env={**env, **more},
                             capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, (ran.stdout, ran.stderr)
    assert (tmp_path / "a" / "data" / "runs" / "suc.toml").read_text() == 'cells = ["committed"]\n'
    assert not (tmp_path / "a" / "confirm.txt").exists()  # resumed, not chosen again
    assert "PRESET=data/runs/suc.toml RUN=suc " in (tmp_path / "a" / "calls.txt").read_text()
    assert "--after suc --max-cells 12 --run suc2" in (tmp_path / "b" / "confirm.txt").read_text()
    assert "PRESET=data/runs/suc2.toml RUN=suc2 " in (tmp_path / "b" / "calls.txt").read_text()


def test_a_suites_confirmation_waits_for_the_screens_alone_pass(tmp_path):
    """versions_gpu.sh suites: every cell of the screen has a row, but some ran out of memory beside others and
    the alone pass has not measured them yet (a time budget ended it): the confirmation is not chosen from such
    a screen; it waits, and says how many cells are left. With none left it goes on."""
    import subprocess

    script = ROOT / "benchmarks" / "gpu_machine" / "versions_gpu.sh"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _suites_stand_ins(bin_dir)
    out = {}
    for name, pending in (("a", "26"), ("b", "0")):
        work = tmp_path / name
        (work / "data" / "runs").mkdir(parents=True)
        ran = subprocess.run(["bash", str(script), "suites", "su", "600"], cwd=work, capture_output=True, text=True,
                             env={"PATH": f"{bin_dir}:/usr/bin:/bin", "NEW": str(bin_dir / "newpy"), "PENDING": pending},
                             timeout=60)
        assert ran.returncode == 0, (ran.stdout, ran.stderr)
        assert "data/runs/su-torchA data/runs/su-torchB" in (work / "pending.txt").read_text()
        out[name] = ran.stdout
    assert "screen su: 26 cell(s) still to be measured alone; the confirmation waits" in out["a"], out["a"]
    assert not (tmp_path / "a" / "confirm.txt").exists() and (tmp_path / "b" / "confirm.txt").exists()
