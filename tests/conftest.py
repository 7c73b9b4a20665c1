import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FIXTURE = ROOT / "tests" / "fixtures" / "small"


@pytest.fixture
def fixture_copy(tmp_path) -> Path:
    """A writable copy of the checked-in fixture run folder (returns the data root)."""
    dst = tmp_path / "data"
    shutil.copytree(FIXTURE, dst)
    return dst


@pytest.fixture(autouse=True)
def _no_published_prior(monkeypatch, tmp_path_factory):
    """In-process collects estimate from their own test's runs, not from this checkout's published
    runs (collector.host.earlier.PUBLISHED); a test that means to read published runs sets its own."""
    import collector.host.earlier

    monkeypatch.setattr(collector.host.earlier, "PUBLISHED", tmp_path_factory.getbasetemp() / "no-published-runs")


# Tiers (make test-fast leaves these out): the real-SLURM tests (test_slurm's tests named *real*;
# its fake-scheduler tests stay in the fast tier) and the headless-browser tests
_MODULE_MARKS = {"test_slurm": "slurm", "test_browser": "browser"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        mark = _MODULE_MARKS.get(module)
        if mark and (module != "test_slurm" or "real" in item.name):
            item.add_marker(getattr(pytest.mark, mark))
