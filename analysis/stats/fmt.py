"""How the reports write numbers: one formatter per kind (ms, s, x, %, bytes, steps), cell labels,
a failure's one-line summary. Templates print what these return."""
from __future__ import annotations

from analysis.stats import core as stats
from collector.record.contract import last_logged_step

_UNITS = ("B", "KiB", "MiB", "GiB")


def failure_summary(error) -> str:
    """The error's first line; for a process that died without saying where (rows written before
    the collector named the last step), the last `[cell +...]` step found in the log tail it kept."""
    text = "" if stats.missing(error) else str(error).strip()
    first = text.splitlines()[0] if text else ""
    if "last step logged" in first:
        return first
    step = last_logged_step(text)
    return f"{first}; last step logged: {step}" if step else first


def fmt_ms(v) -> str:
    if stats.missing(v):
        return "-"
    return f"{v:.3f} ms" if v < 10 else f"{v:.1f} ms"


def fmt_s(v) -> str:
    return "-" if stats.missing(v) else (f"{v:.2f} s" if v < 10 else f"{v:.1f} s")


def fmt_x(v) -> str:
    return "-" if stats.missing(v) else f"{v:.2f}x"


def fmt_pct(v) -> str:
    return "-" if stats.missing(v) else f"{100 * v:.0f}%"


def byte_unit(values) -> str:
    """One unit for a whole column: the one that suits its largest value."""
    top = max((float(v) for v in values if not stats.missing(v)), default=0.0)
    unit = "B"
    for u in _UNITS[1:]:
        if top < 1024:
            break
        top, unit = top / 1024, u
    return unit


def fmt_bytes(v, unit: str | None = None) -> str:
    if stats.missing(v):
        return "-"
    v = float(v)
    unit = unit or byte_unit([v])
    v /= 1024 ** _UNITS.index(unit)
    return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"


def fmt_steps(v, eligible: bool, verdict: str | None = None) -> str:
    if not eligible:
        return "-"
    if verdict == "no clear difference":
        return "no clear gain"
    return "never pays off" if stats.missing(v) else f"{v:,.0f}"


def cell_label(r) -> str:
    scope = "" if r["compile_scope"] == "model" else f" [{r['compile_scope']}]"
    return f"{r['model']} {r['phase']} {r['dtype']} bs{r['batch_size']} {r['mode']}{scope}"


def verdict_block(summary_md: str) -> list[str]:
    """A run's summary.md from its verdict to its caveats (what the README quotes): from the line that
    starts "Compiling " or "No cell" up to the slower-cells or failures list, trailing blanks dropped."""
    lines = summary_md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(("Compiling ", "No cell")))
    end = next((i for i, line in enumerate(lines) if line.startswith(("Slower compiled (", "Failures ("))), len(lines))
    body = lines[start:end]
    while body and not body[-1].strip():
        body.pop()
    return body
