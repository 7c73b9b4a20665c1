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
