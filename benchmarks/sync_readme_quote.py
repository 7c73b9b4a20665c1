"""Restate the README's quotes after a re-render (tests/test_docs.py holds them equal): the shipped
example's verdict, table and caveats under "The answer first", and the published H200 version
comparison's verdict lines under "Comparing two PyTorch versions".

    python benchmarks/sync_readme_quote.py
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.stats.fmt import verdict_block  # noqa: E402


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
    text = text.replace(old, new, 1)
    print(f"README quote: {len(body)} line(s) from docs/examples/{example}/summary.md")
    # the version section quotes the published H200 comparison's verdict lines
    name = "compare-v-h200-torch2.11.0-cu130-vs-v-h200-torch2.14.1-cu130"
    summary = (ROOT / "docs" / "examples" / name / "summary.md").read_text()
    verdict = [line for line in summary.split("Before you quote these:")[0].splitlines() if line.startswith("- ")]
    head, section = text.split("## Comparing two PyTorch versions", 1)
    lines = section.splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.startswith("> - ")]
    if at:
        lines[at[0]:at[-1] + 1] = [f"> {v}\n" for v in verdict]
        text = head + "## Comparing two PyTorch versions" + "".join(lines)
        print(f"README quote: {len(verdict)} verdict line(s) from docs/examples/{name}/summary.md")
    (ROOT / "README.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
