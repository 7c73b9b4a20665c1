"""Restate the README's quoted verdict from the shipped example's summary.md after a re-render
(tests/test_docs.py holds them equal; benchmarks/ and tests/ share no code): the lines between "The answer first"'s first quoted line
and the end of that quote are replaced by the summary's verdict, table and caveats.

    python benchmarks/sync_readme_quote.py
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.fmt import verdict_block  # noqa: E402


def main() -> int:
    text = (ROOT / "README.md").read_text()
    section = text.split("## The answer first", 1)[1].split("\n## ", 1)[0]
    example = re.search(r"\(docs/examples/([^/]+)/summary\.md\)", section).group(1)
    lines = section.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(">"))
    last = next((i for i in range(first, len(lines)) if not lines[i].startswith(">")), len(lines))
    body = verdict_block((ROOT / "docs" / "examples" / example / "summary.md").read_text())
    old = "\n".join(lines[first:last])
    new = "\n".join(f"> {q}" if q else ">" for q in body)
    if old not in text:
        print("the README's quote was not found as read", file=sys.stderr)
        return 1
    (ROOT / "README.md").write_text(text.replace(old, new, 1))
    print(f"README quote: {len(body)} line(s) from docs/examples/{example}/summary.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
