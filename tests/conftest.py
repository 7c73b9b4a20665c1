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
