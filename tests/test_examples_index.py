"""data/examples/INDEX.md lists every example run with a status, its uses and a purpose; a run nothing
uses, or one the index does not list, fails here (benchmarks/examples_index.py --check)."""
import subprocess
import sys

from conftest import ROOT


def test_the_examples_index_lists_every_run_and_every_run_has_a_use():
    got = subprocess.run([sys.executable, "benchmarks/examples_index.py", "--check"], cwd=ROOT,
                         capture_output=True, text=True)
    assert got.returncode == 0, got.stdout + got.stderr
    assert "unused" not in got.stdout.splitlines()[-1]


def test_the_index_check_fails_on_an_unlisted_run_and_on_a_run_nothing_uses(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import examples_index as ei

    found = ei.rows()
    listed = ei.read_index()
    assert set(listed) == {r for r, *_ in found}
    monkeypatch.setattr(ei, "runs", lambda: sorted([*listed, "zz-new-run"]))
    bad = ei.problems([*found, ("zz-new-run", "unused", [], "")])
    assert bad == ["zz-new-run: a run under data/examples/ that INDEX.md does not list",
                   "zz-new-run: nothing uses it (no doc, test, benchmark or published.toml names it): remove it"]
    # a use is the run's whole id: a longer id that starts with it is not a use
    assert ei.uses("t5-torch2.11.0-cu130", {"x.md": "t5r-torch2.11.0-cu130"}) == []
    assert ei.uses("t5-torch2.11.0-cu130", {"x.md": "see t5-torch2.11.0-cu130."}) == ["x.md"]
    assert ei.uses("smoke-cpu-torch2.13.0-a", {"x.md": "`smoke-cpu-torch*`"}) == ["x.md"]
