"""The published examples (data/examples/published.toml) and the index page of a report folder.

`make report` with no run named renders the runs of your own (data/runs/) and the published examples,
not the evidence runs behind the docs, and writes OUT/index.html and OUT/index.md: every report of
that invocation with its one-line purpose, status and link, and the published comparisons with the
command that renders them and their pre-rendered copies under docs/examples/.
"""
from __future__ import annotations

import html
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from analysis.data.load import DataError
from analysis.render.pages import md_cell, write_atomic



def project_root() -> Path:
    """The project folder: the checkout this package sits in (it has data/), else the current directory
    (an installed package lives in site-packages, where no data/ is: `python -m analysis` run from a
    project folder reads that folder's data/ and writes its reports/)."""
    here = Path(__file__).resolve().parents[2]
    return here if (here / "data").is_dir() else Path.cwd()


ROOT = project_root()
PUBLISHED = ROOT / "data" / "examples" / "published.toml"


@dataclass(frozen=True)
class Published:
    runs: dict[str, str]  # run id -> purpose, in the file's order
    comparisons: list[tuple[str, list[str], str]]  # (baseline, candidates, purpose)
    repeats: dict = None  # (baseline, first candidate) -> ["A2:B2", ...] (a comparison's `repeats`)


def published(path: Path = PUBLISHED) -> Published | None:
    """The published examples; None where there is no such file (an installed package, a folder
    of data without one: every run found is then rendered); a malformed one is a DataError naming it."""
    if not Path(path).exists():
        return None
    try:
        data = tomllib.loads(Path(path).read_text())
        runs = {r["id"]: r["purpose"] for r in data.get("run", [])}
        comps = [(c["baseline"], list(c["candidates"]), c["purpose"]) for c in data.get("comparison", [])]
        reps = {(c["baseline"], c["candidates"][0]): list(c["repeats"]) for c in data.get("comparison", [])
                if c.get("repeats")}
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise DataError(f"{path}: cannot read the published examples ({type(exc).__name__}: {exc}); "
                        "each [[run]] needs id and purpose, each [[comparison]] baseline, candidates and purpose "
                        "(and may name repeats)") from None
    return Published(runs, comps, reps)


@dataclass(frozen=True)
class Entry:
    run_id: str
    purpose: str
    status: str
    device: str
    torch: str


def write_index(out: Path, entries: list[Entry], pub: Published, evidence: int) -> Path:
    """OUT/index.html (self-contained) and OUT/index.md; returns the HTML path."""
    out = Path(out)
    rows_md, rows_html = [], []
    for e in entries:
        cells = [e.run_id, e.purpose, e.device, e.torch, e.status]
        rows_md.append(f"| [{e.run_id}]({e.run_id}/report.md) | " + " | ".join(md_cell(c) for c in cells[1:]) + " |")
        rows_html.append(f'<tr><td><a href="{html.escape(e.run_id)}/report.html">{html.escape(e.run_id)}</a></td>'
                         + "".join(f"<td>{html.escape(c)}</td>" for c in cells[1:]) + "</tr>")
    comp_md, comp_html = [], []
    for base, cands, purpose in pub.comparisons:
        cmd = f'make report BASELINE={base} CANDIDATE="{" ".join(cands)}"'
        if (pub.repeats or {}).get((base, cands[0])):
            cmd += f' REPEATS="{" ".join(pub.repeats[(base, cands[0])])}"'
        links = []
        for c in cands:
            shipped = ROOT / "docs" / "examples" / f"compare-{base}-vs-{c}" / "report.html"
            if shipped.exists():
                links.append((c, os.path.relpath(shipped, out)))
        comp_md.append(f"| {md_cell(purpose)} | `{cmd}` | " + ", ".join(f"[{c}]({p})" for c, p in links) + " |")
        comp_html.append(f"<tr><td>{html.escape(purpose)}</td><td><code>{html.escape(cmd)}</code></td><td>"
                         + ", ".join(f'<a href="{html.escape(p)}">{html.escape(c)}</a>' for c, p in links) + "</td></tr>")
    rendered_md, rendered_html = _rendered_sections(out)
    note = (f"{evidence} more run(s) under data/examples/ are evidence behind the docs (docs/data.md): "
            "`make report RUN=<id>` renders one, `make report ALL=1` all.") if evidence else ""
    md = ["# torch.compile reports", "", "| run | purpose | device | torch | cells |", "|---|---|---|---|---|",
          *rows_md, ""]
    if comp_md:
        md += ["## Published comparisons", "", "| what | render it | shipped copy |", "|---|---|---|", *comp_md, ""]
    md += [rendered_md, ""]
    if note:
        md += [note, ""]
    write_atomic(out / "index.md", "\n".join(md))
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>torch.compile reports</title>"
        "<style>body{font:15px/1.45 system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse}"
        "td,th{border-bottom:1px solid #ddd;padding:.35em .6em;text-align:left;vertical-align:top}"
        "code{font-size:13px}</style></head><body>\n<h1>torch.compile reports</h1>\n"
        "<table><tr><th>run</th><th>purpose</th><th>device</th><th>torch</th><th>cells</th></tr>\n"
        + "\n".join(rows_html) + "\n</table>\n"
        + ("<h2>Published comparisons</h2>\n<table><tr><th>what</th><th>render it</th><th>shipped copy</th></tr>\n"
           + "\n".join(comp_html) + "\n</table>\n" if comp_html else "")
        + rendered_html + "\n"
        + (f"<p>{html.escape(note)}</p>\n" if note else "") + "</body></html>\n")
    write_atomic(out / "index.html", page)
    return out / "index.html"


MARK = ("<!-- rendered comparisons -->", "<!-- /rendered comparisons -->")


def _rendered_sections(out: Path) -> tuple[str, str]:
    """The index's list of the comparisons rendered in OUT (every compare-*/ with a report), as
    Markdown and HTML, each between MARK so that a later comparison can refresh it."""
    found = sorted(p.name for p in Path(out).glob("compare-*") if (p / "report.html").exists())
    md_rows = [f"| [{n}]({n}/report.md) | {md_cell(_headline(Path(out) / n))} |" for n in found]
    html_rows = [f'<tr><td><a href="{html.escape(n)}/report.html">{html.escape(n)}</a></td>'
                 f"<td>{html.escape(_headline(Path(out) / n))}</td></tr>" for n in found]
    md = "\n".join([MARK[0], "## Comparisons rendered here", "",
                     *(["| comparison | verdict's first line |", "|---|---|", *md_rows] if found else
                       ["None yet: `make report BASELINE=<run> CANDIDATE=<run>` renders one."]), MARK[1]])
    page = (MARK[0] + "<h2>Comparisons rendered here</h2>\n"
            + ("<table><tr><th>comparison</th><th>verdict's first line</th></tr>\n" + "\n".join(html_rows) + "\n</table>\n"
               if found else "<p>None yet: <code>make report BASELINE=&lt;run&gt; CANDIDATE=&lt;run&gt;</code> renders one.</p>\n")
            + MARK[1])
    return md, page


def _headline(folder: Path) -> str:
    """A rendered comparison's first verdict line (its summary.md), or ''."""
    try:
        lines = (folder / "summary.md").read_text().splitlines()
    except OSError:
        return ""
    return next((line[2:] for line in lines if line.startswith("- ")), "")


def refresh_rendered(out: Path) -> None:
    """After a comparison is rendered into OUT: list it in OUT's index, where one was written."""
    md, page = _rendered_sections(out)
    for name, new in (("index.md", md), ("index.html", page)):
        path = Path(out) / name
        try:
            text = path.read_text()
        except OSError:
            continue
        start, end = text.find(MARK[0]), text.find(MARK[1])
        if start >= 0 and end > start:
            write_atomic(path, text[:start] + new + text[end + len(MARK[1]):])

