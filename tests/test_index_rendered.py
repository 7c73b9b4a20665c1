"""reports/index.html lists the comparisons rendered beside it, and a comparison rendered later is
added to it (it used to be left out: only the published comparisons' shipped copies were linked)."""
from conftest import ROOT

from analysis import index
from analysis.__main__ import main as analysis_main


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
