"""`make report` for a newcomer: the published examples (data/examples/published.toml) and their own
runs, not the evidence runs; an index page listing each with its purpose; --all for everything."""
from __future__ import annotations

import re

import pytest

from analysis.commands import index
from analysis.__main__ import main as analysis_main
from analysis.data.load import DataError
from conftest import ROOT


@pytest.mark.slow
@pytest.mark.evidence
def test_the_default_report_renders_the_published_examples_and_an_index(tmp_path, capsys):
    assert analysis_main(["--out", str(tmp_path), "--reps", "50"]) == 0
    pub = index.published()
    rendered = {p.name for p in tmp_path.iterdir() if (p / "report.html").exists()}
    assert set(pub.runs) <= rendered
    assert not rendered & {"aa-venv-direct", "repeat-cpu-a", "pre-b"}  # evidence runs stay out of the way
    page = (tmp_path / "index.html").read_text()
    for run_id, purpose in pub.runs.items():
        assert f'<a href="{run_id}/report.html">{run_id}</a>' in page and purpose.split("`")[0] in page
    for base, cands, _ in pub.comparisons:  # each published comparison: its command and its shipped copy
        assert f"BASELINE={base}" in page
        if (base, cands[0]) in pub.repeats:
            assert f'REPEATS=&quot;{" ".join(pub.repeats[(base, cands[0])])}&quot;' in page
        for c in cands:
            link = re.search(rf'href="([^"]*compare-{re.escape(base)}-vs-{re.escape(c)}/report.html)"', page)
            assert link and (tmp_path / link.group(1)).resolve().exists()
    md = (tmp_path / "index.md").read_text()
    assert "more run(s) under data/examples/ are evidence" in md and "make report ALL=1" in md


def test_a_malformed_published_list_is_named(tmp_path):
    bad = tmp_path / "published.toml"
    bad.write_text("[[run]]\nid = 'x'\n")  # no purpose
    with pytest.raises(DataError, match=r"published.toml: cannot read the published examples .*purpose"):
        index.published(bad)


@pytest.mark.evidence
def test_every_published_id_exists():
    pub = index.published()
    ids = {p.parent.name for p in (ROOT / "data" / "examples").glob("*/run.json")}
    named = set(pub.runs) | {x for b, cs, _ in pub.comparisons for x in [b, *cs]}
    named |= {x for reps in pub.repeats.values() for pair in reps for x in pair.split(":")}
    assert named <= ids, named - ids
    assert pub.repeats  # the README's comparison names its repeats


def test_an_installed_analysis_reads_the_current_folders_data(tmp_path):
    """Installed with pip, the package sits in site-packages with no data/ beside it: `python -m analysis`
    run from a project folder reads that folder's data/ and writes its reports/ there."""
    import shutil
    import subprocess
    import sys

    site = tmp_path / "site"
    for pkg in ("analysis", "collector", "report_templates"):
        shutil.copytree(ROOT / pkg, site / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    proj = tmp_path / "proj"
    shutil.copytree(ROOT / "tests" / "fixtures" / "small", proj / "data" / "runs")
    done = subprocess.run([sys.executable, "-m", "analysis", "--reps", "100"], cwd=proj,
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (proj / "reports" / "fixture-small" / "report.md").is_file()
    assert "site-packages" not in done.stderr
