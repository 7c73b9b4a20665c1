"""The estimates.json files against their JSON Schemas (analysis/data/schemas/*.schema.json), with the
record layer's small checker (collector/record/jsonschema.py, which run.json's schema uses too)."""
from __future__ import annotations

import json
from pathlib import Path

from collector.record.jsonschema import errors  # noqa: F401 (tests read it from here)

SCHEMAS = Path(__file__).parent / "schemas"


def check_file(path: Path) -> list[str]:
    """An estimates.json against its schema (a run's or a comparison's, told by its keys)."""
    data = json.loads(Path(path).read_text())
    name = "compare-estimates" if "baseline" in data else "run-estimates"
    return errors(data, json.loads((SCHEMAS / f"{name}.schema.json").read_text()))


if __name__ == "__main__":  # python -m analysis.data.schema_check FILE...: exit 1 naming every breach
    import sys

    bad = 0
    for name in sys.argv[1:]:
        found = check_file(Path(name))
        bad += bool(found)
        print(f"{name}: " + ("valid" if not found else f"{len(found)} problem(s)\n  " + "\n  ".join(found[:20])))
    sys.exit(1 if bad else 0)
