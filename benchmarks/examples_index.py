"""The index of data/examples (data/examples/INDEX.md): every run folder, its status, where it is used and
what it is. `--check` (what tests/test_examples_index.py runs) fails on a run the index does not list,
a listed run that is not there, or a run nothing uses; without it the index is written again, keeping
each run's purpose as written and filling the status and uses from the repository.

    python benchmarks/examples_index.py --check
    python benchmarks/examples_index.py              # rewrite data/examples/INDEX.md

Status: `published` (data/examples/published.toml: `make report` renders it), `evidence` (a doc quotes
it: the docs that name it are its uses), `test` (only tests read it), `superseded` (its purpose says so;
kept while something still uses it). A run is used where its id appears in README.md, docs/*.md (the
rendered examples aside), tests/, benchmarks/ or published.toml, by its full id or by a prefix pattern
the text writes with a `*` (`smoke-cpu-torch*`).
"""
from __future__ import annotations

import argparse
import functools
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "data" / "examples"
INDEX = EXAMPLES / "INDEX.md"
HEADER = """# data/examples: every run, its status and its use

Written by `python benchmarks/examples_index.py` (statuses and uses from the repository; the purposes
as written here); `tests/test_examples_index.py` fails on a run this index does not list or that
nothing uses. Status: **published** (`published.toml`: `make report` renders it), **evidence** (a doc
quotes it), **test** (only tests read it), **superseded** (replaced by a later run; kept while a use
remains). Render any run with `make report RUN=<id>`, all with `make report ALL=1`.

| run | status | used by | purpose |
|---|---|---|---|
"""


def runs() -> list[str]:
    return sorted(p.parent.name for p in EXAMPLES.glob("*/run.json"))


def _sources() -> dict[str, str]:
    """Text of every file that may use a run, by its path relative to the project."""
    files = [ROOT / "README.md", EXAMPLES / "published.toml", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "tests").glob("*.py")), *sorted((ROOT / "benchmarks").glob("*.py")),
             *sorted((ROOT / "benchmarks").glob("*.sh"))]
    return {str(f.relative_to(ROOT)): f.read_text() for f in files if f.is_file() and f != Path(__file__)}


def uses(run: str, sources: dict[str, str]) -> list[str]:
    """The files whose text names the run: its id as a whole word, or a `prefix*` pattern it matches."""
    out = []
    whole = re.compile(r"(?<![\w.-])" + re.escape(run) + r"(?!\w|\.\w|-(?!vs-)\w)")
    for name, text in sources.items():
        if run in text and whole.search(text) or any(run.startswith(p) for p in _stars(text)):
            out.append(name)
    return out


@functools.lru_cache(maxsize=None)
def _stars(text: str) -> tuple[str, ...]:
    """The `prefix*` patterns a text writes (prefixes of 4 characters or more)."""
    return tuple(p for p in set(re.findall(r"([\w.-]+)\*", text)) if len(p) >= 4)


def status(run: str, used: list[str], purpose: str) -> str:
    if "superseded" in purpose.lower():
        return "superseded"
    if run in _published():
        return "published"
    if any(u.startswith(("docs/", "README")) for u in used):
        return "evidence"
    return "test" if used else "unused"


def _published() -> set[str]:
    import tomllib

    p = tomllib.loads((EXAMPLES / "published.toml").read_text())
    ids = {r["id"] for r in p.get("run", [])}
    for c in p.get("comparison", []):
        ids |= {c["baseline"], *c.get("candidates", [])}
        ids |= {x for pair in c.get("repeats", []) for x in pair.split(":")}
    return ids


def read_index() -> dict[str, str]:
    """run -> purpose, from the index as written."""
    out = {}
    if INDEX.exists():
        for line in INDEX.read_text().splitlines():
            m = re.match(r"\| `([^`]+)` \| [^|]+ \| [^|]* \| (.*) \|$", line)
            if m:
                out[m.group(1)] = m.group(2)
    return out


def rows() -> list[tuple[str, str, list[str], str]]:
    sources = _sources()
    purposes = read_index()
    out = []
    for run in runs():
        used = uses(run, sources)
        purpose = purposes.get(run, "")
        out.append((run, status(run, used, purpose), used, purpose))
    return out


def problems(found: list[tuple[str, str, list[str], str]]) -> list[str]:
    listed, present = set(read_index()), set(runs())
    out = [f"{r}: a run under data/examples/ that INDEX.md does not list" for r in sorted(present - listed)]
    out += [f"{r}: listed in INDEX.md but not under data/examples/" for r in sorted(listed - present)]
    out += [f"{r}: nothing uses it (no doc, test, benchmark or published.toml names it): remove it"
            for r, st, used, _ in found if not used]
    out += [f"{r}: no purpose written in INDEX.md" for r, _, _, p in found if r in listed and not p.strip()]
    return out


def write(found) -> None:
    lines = [f"| `{r}` | {st} | {', '.join(used) or '-'} | {p} |" for r, st, used, p in found]
    INDEX.write_text(HEADER + "\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    found = rows()
    if args.check:
        bad = problems(found)
        for b in bad:
            print(b)
        counts: dict[str, int] = {}
        for _, st, _, _ in found:
            counts[st] = counts.get(st, 0) + 1
        print(f"{len(found)} runs: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        return 1 if bad else 0
    write(found)
    print(f"wrote {INDEX.relative_to(ROOT)}: {len(found)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
