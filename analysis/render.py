"""Render a RunReport with Jinja into report.html (self-contained) and report.md (+ PNG files)."""
from __future__ import annotations

import base64
import os
import re
from pathlib import Path

import jinja2

from analysis import charts
from analysis.context import Chart, RunReport

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "report_templates"

CHARTS = [  # key, function, title, alt text
    ("heatmap", charts.heatmap, "Speedup by model and mode", "heatmap of geometric-mean speedup, model by mode"),
    ("batch_sweep", charts.batch_sweep, "Speedup against batch size", "speedup with 95% CI against batch size"),
    ("compile_times", charts.compile_times, "Compile time, cold and warm cache", "first compiled call per cell"),
    ("amortization", charts.amortization, "When compiling pays off", "cumulative time against steps"),
    ("efficiency", charts.efficiency, "Achieved TFLOP/s against the measured peak",
     "achieved TFLOP/s per cell, eager and compiled, with the measured peak"),
]


def md_cell(value) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped, HTML made inert."""
    text = re.sub(r"\s+", " ", str(value)).strip()
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("|", "\\|").replace("`", "\\`")
    return text[:300] + ("…" if len(text) > 300 else "")


def md_text(value) -> str:
    """Free text safe in Markdown paragraphs (HTML made inert)."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE_DIR), autoescape=jinja2.select_autoescape(
                                 enabled_extensions=("html.j2",), default=False),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.filters["mdcell"] = md_cell
    env.filters["mdtext"] = md_text
    return env


def draw_charts(report: RunReport, out_dir: Path) -> None:
    """Write the PNG charts beside the report and record them in report.charts."""
    assets = out_dir / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    for key, fn, title, alt in CHARTS:
        path = fn(report.chart_rows.get(key, []), assets / f"{key}.png")
        if path is not None:
            report.charts[key] = Chart(key, title, f"assets/{key}.png", alt)


def write_atomic(path: Path, text: str) -> None:
    """Write under a private name, then rename: a full disk or a stop never leaves half a report
    in place of a good one, nor a temporary file behind."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def render(report: RunReport, out_dir: Path) -> tuple[Path, Path]:
    """Write report.md and report.html into out_dir; returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    draw_charts(report, out_dir)
    data_uris = {k: "data:image/png;base64," + base64.b64encode((out_dir / c.filename).read_bytes()).decode()
                 for k, c in report.charts.items()}
    env = _env()
    md = env.get_template("report.md.j2").render(r=report)
    html = env.get_template("report.html.j2").render(r=report, images=data_uris)
    md_path, html_path = out_dir / "report.md", out_dir / "report.html"
    write_atomic(md_path, md)
    write_atomic(html_path, html)
    return md_path, html_path


def render_compare(report, out_dir: Path) -> tuple[Path, Path]:
    """Write the comparison's report.md and report.html (with its forest chart) into out_dir."""
    out_dir = Path(out_dir)
    (out_dir / "assets").mkdir(parents=True, exist_ok=True)
    path = charts.forest(report.chart_rows.get("forest", []), out_dir / "assets" / "forest.png")
    images = {}
    if path is not None:
        report.charts["forest"] = Chart("forest", "Speedup change per cell", "assets/forest.png",
                                        "speedup change B/A per cell with 95% intervals")
        images["forest"] = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()
    env = _env()
    md_path, html_path = out_dir / "report.md", out_dir / "report.html"
    write_atomic(md_path, env.get_template("compare.md.j2").render(r=report))
    write_atomic(html_path, env.get_template("compare.html.j2").render(r=report, images=images))
    return md_path, html_path
