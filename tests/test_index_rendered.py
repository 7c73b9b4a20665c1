"""reports/index.html lists the comparisons rendered beside it, and a comparison rendered later is
added to it (it used to be left out: only the published comparisons' shipped copies were linked)."""
import pytest
from conftest import ROOT

from analysis.commands import index
from analysis.__main__ import main as analysis_main


@pytest.mark.evidence
def test_a_comparison_rendered_after_the_index_is_listed_in_it(tmp_path):
    pub = index.Published(runs={}, comparisons=[], repeats={})
    index.write_index(tmp_path, [], pub, 0)
    assert "None yet" in (tmp_path / "index.html").read_text()
    data = str(ROOT / "data" / "examples")
    assert analysis_main(["--data", data, "--out", str(tmp_path), "--reps", "50",
                          "--baseline", "aa-venv-direct", "--candidate", "aa-venv-venv"]) == 0
    page, md = (tmp_path / "index.html").read_text(), (tmp_path / "index.md").read_text()
    assert '<a href="compare-aa-venv-direct-vs-aa-venv-venv/report.html">' in page and "None yet" not in page
    assert "[compare-aa-venv-direct-vs-aa-venv-venv](compare-aa-venv-direct-vs-aa-venv-venv/report.md)" in md
    assert "torch 2.11.0+cu130 against 2.11.0+cu130" in page  # the verdict's first line beside the link
    # the index written again (the runs rendered) keeps listing it
    index.write_index(tmp_path, [], pub, 0)
    assert "compare-aa-venv-direct-vs-aa-venv-venv/report.html" in (tmp_path / "index.html").read_text()


@pytest.mark.evidence
def test_a_comparison_with_repeats_has_its_own_folder_beside_the_plain_one(tmp_path):
    """Rendering A against B plainly and with REPEATS used to write one folder, the second silently
    replacing the first; now each has its own, and the index lists both."""
    index.write_index(tmp_path, [], index.Published(runs={}, comparisons=[], repeats={}), 0)
    data = str(ROOT / "data" / "examples")
    base = ["--data", data, "--out", str(tmp_path), "--reps", "50", "--baseline", "aa-venv-direct",
            "--candidate", "aa-venv-venvp5", "--allow-mismatch"]
    assert analysis_main(base) == 0
    assert analysis_main(base + ["--repeat", "aa-venv-venv:aa-venv-venvp5"]) == 0
    plain = tmp_path / "compare-aa-venv-direct-vs-aa-venv-venvp5"
    repeated = tmp_path / "compare-aa-venv-direct-vs-aa-venv-venvp5-repeats-aa-venv-venv-vs-aa-venv-venvp5"
    # the plain rendering is still the plain one (the second no longer wrote over it)
    assert "## Repeats across pairs of runs" in (repeated / "report.md").read_text()
    assert "## Repeats across pairs of runs" not in (plain / "report.md").read_text()
    page = (tmp_path / "index.html").read_text()
    assert f'href="{plain.name}/report.html"' in page and f'href="{repeated.name}/report.html"' in page
