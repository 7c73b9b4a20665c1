"""Render a RunReport with Jinja into report.html (self-contained) and report.md (+ PNG files)."""
from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import shutil
from pathlib import Path

import jinja2

from analysis.render import charts
from collector.record.contract import pid_alive
from analysis.run_report.context import Chart, RunReport

TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "report_templates"

CHARTS = [  # key, function, title, alt text
    ("summary", charts.summary, "Every cell's speedup", "speedup with 95% interval of every cell, by phase and mode"),
    ("heatmap", charts.heatmap, "Speedup by model and mode", "heatmap of geometric-mean speedup, model by mode"),
    ("batch_sweep", charts.batch_sweep, "Speedup against batch size", "speedup with 95% CI against batch size"),
    ("compile_times", charts.compile_times, "Compile time, cold and warm cache", "first compiled call per cell"),
    ("amortization", charts.amortization, "When compiling pays off", "cumulative time against steps"),
    ("efficiency", charts.efficiency, "Achieved TFLOP/s against the measured peak",
     "achieved TFLOP/s per cell, eager and compiled, with the measured peak"),
]


_TAG = re.compile(r"<(?=[A-Za-z/!?])")  # what could open an HTML tag, comment or declaration
_ENTITY = re.compile(r"&(?=#?\w+;)")  # what could start a character reference


def _inert(text: str) -> str:
    """HTML made inert with Markdown's own backslash escapes, and only where it could act: `\\<b>` shows
    as `<b>`, while `->`, `a < b` or `R&D` stay as written (no `&gt;` in a pasted report). A backslash
    in the text is doubled first, so it shows as itself and cannot undo an escape that follows it."""
    return _ENTITY.sub(r"\\&", _TAG.sub(r"\\<", text.replace("\\", "\\\\")))


def md_cell(value) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped, HTML made inert."""
    text = _inert(re.sub(r"\s+", " ", str(value)).strip())
    text = text.replace("|", "\\|").replace("`", "\\`")
    return text[:300] + ("…" if len(text) > 300 else "")


def md_text(value) -> str:
    """Free text safe in Markdown paragraphs (HTML made inert)."""
    return _inert(str(value))


def md_code(value, limit: int = 300) -> str:
    """Text from the data as an inline code span: shown as written when pasted anywhere (no HTML
    entities, nothing interpreted), one line; the fence is longer than any run of backticks in it."""
    text = re.sub(r"\s+", " ", str(value)).strip()
    text = text[:limit] + ("…" if len(text) > limit else "")
    fence = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE_DIR), autoescape=jinja2.select_autoescape(
                                 enabled_extensions=("html.j2",), default=False),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.filters["mdcell"] = md_cell
    env.filters["mdtext"] = md_text
    env.filters["mdcode"] = md_code
    return env


def draw_charts(report: RunReport, out_dir: Path) -> None:
    """Write the PNG charts beside the report and record them in report.charts."""
    assets = out_dir / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    for key, fn, title, alt in CHARTS:
        path = fn(report.chart_rows.get(key, []), assets / f"{key}.png")
        if path is not None:
            report.charts[key] = Chart(key, title, f"assets/{key}.png", alt)


SCRIPT = (TEMPLATE_DIR / "sort.js").read_text()
# the one script a report may run: allowed by its hash in the page's Content-Security-Policy, so
# any other script (injected text, were it ever not escaped) is refused by the browser
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
COLLAPSED = ("Memory", "Compile time and amortization", "Where compile time goes", "Recompiles across batch sizes",
             "Graph breaks, recompiles and CUDA-graph skips", "Hardware efficiency and energy",
             "Eager baselines across cells", "Where the collection's time went", "Environment", "Every paired cell",
             "Protocol")


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def structure_html(html: str) -> str:
    """Navigation for a rendered page (our own template output; data text is escaped, so no `<h2>`
    comes from data): each `<h2>` gets an anchor, the long evidence sections collapse into
    `<details>`, every table scrolls inside its own container, and a table of contents replaces
    `<!--toc-->`."""
    parts = re.split(r"(?=<h2>)", html)
    head, sections, toc = parts[0], [], []
    for part in parts[1:]:
        m = re.match(r"<h2>(.*?)</h2>", part, re.S)
        title = m.group(1)
        anchor = slug(re.sub(r"<[^>]+>", "", title))
        body = part[m.end():]
        tail = ""
        end = body.find("</body>")
        if end >= 0:
            body, tail = body[:end], body[end:]
        toc.append(f'<a href="#{anchor}">{title}</a>')
        if title in COLLAPSED:
            sections.append(f'<details id="{anchor}"><summary><h2>{title}</h2></summary>{body}</details>\n{tail}')
        else:
            sections.append(f'<h2 id="{anchor}">{title}</h2>{body}{tail}')
    html = head + "".join(sections)
    html = html.replace("<!--toc-->", '<nav class="toc">Contents: ' + " · ".join(toc) + "</nav>", 1)
    return re.sub(r"<table(\b[^>]*)>", r'<div class="scroll"><table\1>', html).replace("</table>", "</table></div>")


def write_atomic(path: Path, text: str) -> None:
    """Write under a private name, then rename: a full disk or a stop never leaves half a report
    in place of a good one, nor a temporary file behind. (collector/host/runner.py's _write_json does the
    same for run.json: the collector does not import analysis.)"""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where the system cannot."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) == 0  # AT_FDCWD, RENAME_EXCHANGE
    except (AttributeError, OSError):
        return False


def _recover(out_dir: Path) -> None:
    """Finish or undo what a killed render of out_dir left: its staging folders go; where only the
    fallback's first rename happened (out_dir moved aside, no new one in place), the old one returns."""
    pattern = re.compile(re.escape(f".{out_dir.name}.") + r"(new|old)-(\d+)")
    for stale in sorted(out_dir.parent.iterdir()):
        m = pattern.fullmatch(stale.name)
        if not m or (pid_alive(int(m.group(2))) and int(m.group(2)) != os.getpid()):
            continue  # not ours, or a render still running
        if m.group(1) == "old" and not out_dir.exists():
            os.rename(stale, out_dir)
        else:
            shutil.rmtree(stale, ignore_errors=True)


@contextlib.contextmanager
def generation(out_dir: Path):
    """One render is one transaction: every file of a report (Markdown, HTML, summary, estimates.json,
    charts) is written into a staging folder beside out_dir, which then takes out_dir's place in one
    step. A render killed at any point leaves the previous generation whole (or, before the first
    render, nothing); readers never see a new report.md beside an old estimates.json."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    _recover(out_dir)
    stage = out_dir.parent / f".{out_dir.name}.new-{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    try:
        yield stage
        if not out_dir.exists():
            os.rename(stage, out_dir)
        elif _exchange(stage, out_dir):
            shutil.rmtree(stage, ignore_errors=True)  # now the previous generation
        else:  # two renames; a kill between them is undone by the next render (_recover)
            old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
            os.rename(out_dir, old)
            os.rename(stage, out_dir)
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def render(report: RunReport, out_dir: Path) -> tuple[Path, Path]:
    """Write report.md, report.html, summary.md, estimates.json and the charts into out_dir as one
    generation; returns the paths of report.md and report.html."""
    out_dir = Path(out_dir)
    with generation(out_dir) as stage:
        _render_run(report, stage)
    return out_dir / "report.md", out_dir / "report.html"


def _render_run(report: RunReport, out_dir: Path) -> None:
    draw_charts(report, out_dir)
    data_uris = {k: "data:image/png;base64," + base64.b64encode((out_dir / c.filename).read_bytes()).decode()
                 for k, c in report.charts.items()}
    env = _env()
    md = env.get_template("report.md.j2").render(r=report)
    html = structure_html(env.get_template("report.html.j2").render(r=report, images=data_uris, script=SCRIPT,
                                                                    script_hash=SCRIPT_HASH))
    md_path, html_path = out_dir / "report.md", out_dir / "report.html"
    write_atomic(md_path, md)
    write_atomic(html_path, html)
    write_atomic(out_dir / "summary.md", env.get_template("summary.md.j2").render(r=report))
    write_atomic(out_dir / "estimates.json", estimates_json(report))


RUN_ESTIMATES_VERSION = 1  # analysis/data/schemas/run-estimates.schema.json


def estimates_json(report: RunReport) -> str:
    """The verdict, its groups and every cell (failed ones with status and error), machine-readable
    for CI gates: numbers as numbers (units in the names), null where missing. The contract is
    analysis/data/schemas/run-estimates.schema.json; docs/report.md describes it."""
    import json

    def clean(v):
        if isinstance(v, float):
            return None if v != v else v
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    meta = dict(report.meta)
    data = {"schema_version": RUN_ESTIMATES_VERSION, "kind": "run", "run_id": report.run_id,
            "generated_at": meta.pop("generated_at_iso", None) or report.generated_at,
            "run": {k: meta.get(k) for k in ("torch_version", "device", "device_name", "preset", "processes")},
            "status": report.status_line, "status_counts": meta.get("status_counts", {}),
            "min_effect": float(report.min_effect.rstrip("%")) / 100, "verdict": report.verdict.sentence,
            "caveats": report.verdict.caveats,
            "groups": [row.numbers for row in report.verdict.rows], "cells": report.chart_rows.get("estimates", [])}
    if report.verdict.suites:  # runs of timm, Hugging Face or user models: the per-suite figures
        data["suites"] = [row.numbers for row in report.verdict.suites]
    return json.dumps(clean(data), indent=1, sort_keys=True, default=str) + "\n"


COMPARE_ESTIMATES_VERSION = 1


def compare_estimates_json(report) -> str:
    """Every per-cell change of every quantity, B/A, with its 95% interval and call, machine-readable
    (a CI gate on a release: fail on any `regressed`), beside the verdict the report prints."""
    import json

    data = {"schema_version": COMPARE_ESTIMATES_VERSION, "baseline": report.baseline,
            "candidate": report.candidate, "title": report.title, "min_effect": report.min_effect,
            "verdict": report.verdict, "caveats": report.caveats, "changes": report.chart_rows.get("estimates", [])}
    if report.suites:  # runs of timm, Hugging Face or user models: each suite's figures A and B, the change
        data["suites"] = [row.numbers for row in report.suites]
        data["newly_failing"] = [c.cell for c in report.newly_failing]
        data["newly_passing"] = [c.cell for c in report.newly_passing]
    if report.trend_cells:  # 3+ runs: the runs of the trend, baseline first (as --candidate gave them)
        data["trend_runs"] = report.trend_runs
    if report.repeat_pairs:  # --repeat: every pair (this one first) and, per called change, its fate in each
        from analysis.compare_report import repeats

        data["repeat_pairs"] = [[p.baseline, p.candidate] for p in report.repeat_pairs]
        data["repeats"] = repeats.as_json(report.repeat_rows)
    if report.program_rows:  # schema v11 records: the compiled program A -> B per cell
        data["program"] = [r.as_json() for r in report.program_rows]
        data["program_suites"] = [s.as_json() for s in report.program_suites]
    if report.kernel_rows:  # PROFILE=1 in both runs: each side's step split into kernels and the rest
        data["step_split"] = [k.as_json() for k in report.kernel_rows]
    return json.dumps(data, indent=1, sort_keys=True, default=str) + "\n"


def render_compare(report, out_dir: Path) -> tuple[Path, Path]:
    """Write the comparison's report.md, report.html, summary.md, estimates.json and charts into out_dir
    as one generation; returns the paths of report.md and report.html."""
    out_dir = Path(out_dir)
    with generation(out_dir) as stage:
        _render_compare(report, stage)
    return out_dir / "report.md", out_dir / "report.html"


def _render_compare(report, out_dir: Path) -> None:
    (out_dir / "assets").mkdir(parents=True, exist_ok=True)
    images = {}
    made = {
        "compiled_forest": (charts.forest(report.chart_rows.get("compiled_forest", []),
                                          out_dir / "assets" / "compiled_forest.png",
                                          xlabel="compiled step time in B / in A (95% CI; left of 1: faster)",
                                          title="compiled step time change per cell"),
                            "Compiled step time change per cell",
                            "compiled step time change B/A per cell with 95% intervals"),
        "forest": (charts.forest(report.chart_rows.get("forest", []), out_dir / "assets" / "forest.png",
                                 title="speedup change per cell"),
                   "Speedup change per cell", "speedup change B/A per cell with 95% intervals"),
        "trend": (charts.trend(report.chart_rows.get("trend", []), report.trend_runs, out_dir / "assets" / "trend.png"),
                  "Compiled step time across runs", "compiled step time per cell across runs, relative to the first"),
    }
    for key, (path, title, alt) in made.items():
        if path is not None:
            report.charts[key] = Chart(key, title, f"assets/{path.name}", alt)
            images[key] = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()
    env = _env()
    md_path, html_path = out_dir / "report.md", out_dir / "report.html"
    write_atomic(md_path, env.get_template("compare.md.j2").render(r=report))
    write_atomic(html_path, structure_html(env.get_template("compare.html.j2").render(
        r=report, images=images, script=SCRIPT, script_hash=SCRIPT_HASH)))
    write_atomic(out_dir / "summary.md", env.get_template("compare_summary.md.j2").render(r=report))
    write_atomic(out_dir / "estimates.json", compare_estimates_json(report))
