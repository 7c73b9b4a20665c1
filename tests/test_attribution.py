"""Which side moved a speedup change (analysis/stats/attribution.py), on the H200 version comparison's
figures: a speedup that rose because eager got slower is an eager change, never a compiled gain."""
import json

import pytest
from conftest import ROOT

from analysis.stats import attribution as at
from analysis.stats import estimates as est


def _e(q, point):
    return est.Estimate(q, point, point * 0.98, point * 1.02, est.IMPROVED, "t")


@pytest.mark.parametrize("eager, compiled, moved", [
    (1.181, 1.047, "eager"),      # MLP train: eager +18.1%, compiled +4.7%, speedup +12.8%
    (1.004, 0.957, "compiled"),   # ResNet-50 bs128: compiled -4.3%, eager flat
    (1.191, 0.918, "both"),       # GPT train bs8: eager +19.1%, compiled -8.2% (eager 67% of it)
    (0.575, 0.470, "both"),       # MLP max-autotune: both far faster, compiled a little more
    (1.20, 1.00, "eager"),        # eager alone
    (1.00, 1.00, None),           # nothing moved
])
def test_the_side_that_carried_the_change(eager, compiled, moved):
    assert at.side(_e("eager", eager), _e("compiled", compiled)) == moved


def test_the_verdict_line_groups_cells_by_the_side_that_moved():
    labels = {"m": "mlp train", "r": "resnet50 bs128"}
    ests = {"eager": {"m": _e("eager", 1.181), "r": _e("eager", 1.004)},
            "compiled": {"m": _e("compiled", 1.047), "r": _e("compiled", 0.957)},
            "speedup": {"m": _e("speedup", 1.128), "r": _e("speedup", 1.049)}}
    line = at.verdict_line(ests, labels)
    assert "eager step slower in 1, speedup up" in line and "compiled step faster in 1, speedup up" in line


@pytest.mark.evidence
def test_the_published_h200_comparison_says_which_side_moved():
    name = "compare-v-h200-torch2.11.0-cu130-vs-v-h200-torch2.14.1-cu130"
    data = json.loads((ROOT / "docs" / "examples" / name / "estimates.json").read_text())
    moved = {c["cell_id"]: c["moved"] for c in data["changes"] if c["quantity"] == "speedup" and c["call"] == "improved"}
    assert moved["mlp__train__amp_bf16__bs32__default__model"] == "eager"
    # ResNet-50 bs128's +4.9% speedup is inside what the 2.11 run's sibling runs moved: not called
    assert "resnet50__infer__amp_bf16__bs128__default__model" not in moved
    summary = (ROOT / "docs" / "examples" / name / "summary.md").read_text()
    assert "eager step slower in 1, speedup up" in summary
    report = (ROOT / "docs" / "examples" / name / "report.md").read_text()
    assert "| mlp train amp_bf16 bs32 default | speedup: the eager step moved (eager +18.1%, compiled +4.7%) |" in report
