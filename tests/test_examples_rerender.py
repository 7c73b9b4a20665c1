"""Every published example (docs/examples/) re-renders from the committed data as committed, the
time stamp aside: a change to the analysis that moves a published figure fails here until the
examples are rendered again (and the docs that quote them restated)."""
import json
import math
import re

import pytest

from analysis.__main__ import main as analysis_main, rendered_folder
from conftest import ROOT

EXAMPLES = sorted(p.name for p in (ROOT / "docs" / "examples").glob("*") if (p / "report.md").exists())
pytestmark = pytest.mark.evidence  # the golden test of the published examples: every test here reads them
STAMP = re.compile(r"(generated|Generated)[: ]+\d{4}-\d\d-\d\d \d\d:\d\d UTC")


def _text(path):
    return STAMP.sub("<stamp>", path.read_text())


def _close(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a if k != "generated_at")
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.slow  # a render per published example (16 s together): the full suite, not test-fast
@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.evidence
def test_a_published_example_re_renders_as_committed(name, tmp_path):
    args = ["--data", str(ROOT / "data" / "examples"), "--out", str(tmp_path)]
    if name.startswith("compare-"):
        a, b = name[len("compare-"):].split("-vs-")
        published = ROOT / "docs" / "examples" / name / "estimates.json"
        # a comparison with a trend names its runs (baseline first): render with all its candidates
        shipped = json.loads(published.read_text()) if published.exists() else {}
        trend = shipped.get("trend_runs", [])
        args += ["--baseline", a, "--allow-mismatch"]
        for c in trend[1:] or [b]:
            args += ["--candidate", c]
        for x, y in shipped.get("repeat_pairs", [])[1:]:  # its repeats, as it was rendered
            args += ["--repeat", f"{x}:{y}"]
    else:
        args += ["--run", name]
    assert analysis_main(args) == 0
    folder = rendered_folder(name, args)  # with REPEATS a folder of its own; published under `name`
    for f in ("report.md", "summary.md"):
        assert _text(tmp_path / folder / f) == _text(ROOT / "docs" / "examples" / name / f), f
    if (ROOT / "docs" / "examples" / name / "estimates.json").exists():
        new, old = (json.loads((d / "estimates.json").read_text())
                    for d in (tmp_path / folder, ROOT / "docs" / "examples" / name))
        assert _close(new, old)


@pytest.mark.evidence
def test_no_published_markdown_carries_html_escapes():
    """A report's Markdown is pasted into release notes and issues: `kernels 53 -> 57`, never `-&gt;`.
    HTML in the data is made inert with Markdown's backslash escapes instead (analysis/render/pages.py)."""
    entity = re.compile(r"&(#\d+|#x[0-9a-fA-F]+|[A-Za-z]+);")
    files = sorted((ROOT / "docs" / "examples").glob("*/*.md"))
    assert len(files) >= 2 * len(EXAMPLES)
    found = {str(f.relative_to(ROOT)): m.group(0) for f in files if (m := entity.search(f.read_text()))}
    assert found == {}
