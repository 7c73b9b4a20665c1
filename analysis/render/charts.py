"""Charts as PNG files (matplotlib, Agg). Each function takes ready rows, writes one file, returns its path.

A chart function returns None when there is nothing to draw.
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402

from collector.record.contract import MODES  # noqa: E402

DPI = 110
MAX_SERIES = 12  # lines in one chart; the tables hold every cell
MAX_ROWS = 40  # models in the heatmap
MAX_BARS = 80  # cells in one bar or dot chart; a truncated chart says so in its title, the tables hold all


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    # bbox "tight": long cell labels are never cut off at the figure's edge
    fig.savefig(path, dpi=DPI, metadata={"Software": None}, bbox_inches="tight")  # no timestamps: reproducible
    plt.close(fig)
    return path


def _truncated(ax, shown: int, total: int) -> None:
    """Say in the chart's title when it shows only the first `shown` of `total` cells."""
    if shown < total:
        ax.set_title(f"first {shown} of {total} cells (the table lists all)", fontsize=9)


def _wrap_mode(mode: str) -> str:
    """A heatmap column label on short lines: 'max-autotune-no-cudagraphs [step]' ->
    'max-autotune\n-no-cg\n[step]'."""
    return mode.replace("-no-cudagraphs", "\n-no-cg").replace(" dynamic", "\ndynamic").replace(" [", "\n[")


def heatmap(rows: list[dict], path: Path) -> Path | None:
    """Model x mode geometric-mean speedup, one panel per phase. rows: phase, model, mode, geomean_speedup."""
    if not rows:
        return None
    keep = sorted({r["model"] for r in rows})[:MAX_ROWS]
    rows = [r for r in rows if r["model"] in keep]
    phases = sorted({r["phase"] for r in rows})
    order = [m for m in MODES if m != "eager"]
    columns = {}
    for phase in phases:
        present = {r["mode"] for r in rows if r["phase"] == phase}
        # e.g. "default dynamic=true", "reduce-overhead [step]" after the plain modes
        columns[phase] = [m for m in order if m in present] + sorted(present - set(order))
    widths = [max(3.5, 0.9 * len(columns[p]) + 1.6) for p in phases]
    fig, axes = plt.subplots(1, len(phases), figsize=(sum(widths), 0.4 * len(keep) + 2.6), squeeze=False,
                             gridspec_kw={"width_ratios": widths})
    for ax, phase in zip(axes[0], phases):
        sub = [r for r in rows if r["phase"] == phase]
        models = sorted({r["model"] for r in sub})
        modes = columns[phase]
        grid = np.full((len(models), len(modes)), np.nan)
        for r in sub:
            grid[models.index(r["model"]), modes.index(r["mode"])] = r["geomean_speedup"]
        logs = np.log2(grid)
        lim = max(1.0, float(np.nanmax(np.abs(logs)))) if np.isfinite(logs).any() else 1.0
        ax.imshow(logs, cmap="RdYlGn", vmin=-lim, vmax=lim, aspect="auto")
        for i in range(len(models)):
            for j in range(len(modes)):
                if not math.isnan(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.2f}x", ha="center", va="center", fontsize=9)
        ax.set_xticks(range(len(modes)), [_wrap_mode(m) for m in modes], fontsize=8, rotation=30, ha="right",
                      rotation_mode="anchor")
        ax.set_yticks(range(len(models)), models, fontsize=8)
        ax.set_title(f"{phase}: speedup over eager (geomean over batch sizes and dtypes)", fontsize=10)
    return _save(fig, path)


def batch_sweep(rows: list[dict], path: Path) -> Path | None:
    """Speedup (with 95% CI) against batch size, one line per (model, phase, dtype, mode, scope)."""
    if not rows:
        return None
    series: dict[tuple, list[dict]] = {}
    for r in rows:
        key = (r["model"], r["phase"], r["dtype"], r["mode"], r["compile_scope"])
        if key in series or len(series) < MAX_SERIES:
            series.setdefault(key, []).append(r)
    phases = sorted({k[1] for k in series})
    fig, axes = plt.subplots(1, len(phases), figsize=(6 * len(phases), 4), squeeze=False)
    for ax, phase in zip(axes[0], phases):
        for key, pts in series.items():
            if key[1] != phase:
                continue
            xs = [p["batch_size"] for p in pts]
            ys = [p["speedup"] for p in pts]
            err = [[max(y - p["speedup_lo"], 0) for y, p in zip(ys, pts)],
                   [max(p["speedup_hi"] - y, 0) for y, p in zip(ys, pts)]]
            label = f"{key[0]} {key[3]}" + ("" if key[4] == "model" else f" ({key[4]})") + f" {key[2]}"
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=label)
        ax.axhline(1.0, color="grey", lw=1, ls="--")
        ax.set_xscale("log", base=2)
        ys_all = [p["speedup"] for k, pts in series.items() if k[1] == phase for p in pts if p["speedup"]]
        if ys_all and max(ys_all) / max(min(ys_all), 1e-9) > 5:  # a 17x and a 1.2x on one linear axis hide the 1.2x
            ax.set_yscale("log", base=2)
            ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.set_xlabel("batch size")
        ax.set_ylabel("speedup over eager")
        ax.set_title(f"{phase}: speedup vs batch size", fontsize=10)
        ax.legend(fontsize=7, loc="best")
    return _save(fig, path)


def compile_times(rows: list[dict], path: Path) -> Path | None:
    """Horizontal bars: compiled first-call time, cold cache and warm cache, per cell (seconds)."""
    rows = [r for r in rows if r["first_call_compiled_s"] is not None]
    if not rows:
        return None
    total, rows = len(rows), rows[:MAX_BARS]
    labels = [r["label"] for r in rows]
    y = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(rows) + 1.4))
    cold = [r["first_call_compiled_s"] for r in rows]
    warm = [r["warm_first_call_compiled_s"] for r in rows]
    ax.barh(y - 0.2, cold, 0.4, label="cold cache")
    ax.barh(y + 0.2, [w or 0 for w in warm], 0.4, label="warm cache")
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    times = [t for t in cold + warm if t]
    if times and max(times) / max(min(times), 1e-3) > 30:  # e.g. 1 s warm beside 300 s of autotuning
        ax.set_xscale("log")
        ax.set_xlabel("first compiled call (s), log scale")
    else:
        ax.set_xlabel("first compiled call (s)")
    ax.legend(fontsize=8)
    _truncated(ax, len(rows), total)
    return _save(fig, path)


def amortization(rows: list[dict], path: Path) -> Path | None:
    """Cumulative time against steps, eager vs compiled, for up to 6 cells; the crossing is marked."""
    rows = rows[:6]
    if not rows:
        return None
    cols = min(3, len(rows))
    nrow = math.ceil(len(rows) / cols)
    fig, axes = plt.subplots(nrow, cols, figsize=(4.6 * cols, 3.4 * nrow), squeeze=False)
    for ax in axes.flat[len(rows):]:
        ax.axis("off")
    for ax, r in zip(axes.flat, rows):
        n_star = r["breakeven_cold_steps"]
        horizon = max(10, int((n_star or 1000) * 2))
        n = np.linspace(1, horizon, 200)
        eager = r["first_call_eager_s"] + (n - 1) * r["eager_median_ms"] / 1e3
        comp = r["first_call_compiled_s"] + (n - 1) * r["compiled_median_ms"] / 1e3
        ax.plot(n, eager, label="eager")
        ax.plot(n, comp, label="compiled (cold cache)")
        if n_star:
            ax.axvline(n_star, color="grey", ls=":", lw=1)
            ax.annotate(f"pays off after\n{n_star:,.0f} steps", (n_star, float(np.interp(n_star, n, eager))),
                        fontsize=8, xytext=(5, -25), textcoords="offset points")
        else:
            ax.text(0.05, 0.9, "never pays off", transform=ax.transAxes, fontsize=9, color="firebrick")
        ax.set_title(r["label"], fontsize=8)
        ax.set_xlabel("steps")
        ax.set_ylabel("cumulative time (s)")
        ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


def forest(rows: list[tuple], path: Path, xlabel: str = "speedup in B / speedup in A (95% CI)",
           title: str | None = None) -> Path | None:
    """A ratio B/A per cell with its 95% interval (the speedup change by default). rows: (label,
    point, lo, hi), sorted."""
    if not rows:
        return None
    total, rows = len(rows), rows[:MAX_BARS]
    y = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(rows) + 1.5))
    _truncated(ax, len(rows), total)
    points = [r[1] for r in rows]
    ax.errorbar(points, y, xerr=[[p - r[2] for p, r in zip(points, rows)], [r[3] - p for p, r in zip(points, rows)]],
                fmt="o", capsize=3)
    ax.axvline(1.0, color="grey", ls="--", lw=1)
    ax.set_yticks(y, [r[0] for r in rows], fontsize=7)
    ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title, fontsize=9)
    return _save(fig, path)


def trend(rows: list[dict], runs: list[str], path: Path) -> Path | None:
    """Each cell's compiled step time over several runs, relative to the first run that has it.
    rows: label, values (one ratio or None per run)."""
    if not rows or len(runs) < 3:
        return None
    rows = rows[:MAX_BARS]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    x = np.arange(len(runs))
    for r in rows:
        pts = [(i, v) for i, v in zip(x, r["values"]) if v is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", lw=1, ms=3, label=r["label"])
    ax.axhline(1.0, color="grey", ls="--", lw=1)
    ax.set_xticks(x, runs, fontsize=7, rotation=15)
    ax.set_ylabel("compiled step time / first run's")
    ax.set_title("compiled step time per cell across runs (lower is faster)", fontsize=9)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return _save(fig, path)


def efficiency(rows: list[dict], path: Path) -> Path | None:
    """Roofline-style: achieved TFLOP/s per cell, eager and compiled, against the measured peak.

    rows: label, eager, compiled (TFLOP/s), peak_key, peak (TFLOP/s or None). Log scale: a point
    a decade under its peak line runs at 10% of what the GPU's matrix units can do."""
    if not rows:
        return None
    total, rows = len(rows), sorted(rows, key=lambda r: r["compiled"], reverse=True)[:MAX_BARS]
    y = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(8.5, 0.28 * len(rows) + 1.6))
    _truncated(ax, len(rows), total)
    for i, r in enumerate(rows):
        ax.plot([r["eager"], r["compiled"]], [i, i], color="lightgrey", lw=2, zorder=1)
    ax.scatter([r["eager"] for r in rows], y, marker="o", label="eager", zorder=2)
    ax.scatter([r["compiled"] for r in rows], y, marker="D", label="compiled", zorder=3)
    for key, style in (("bf16", "--"), ("tf32", "-."), ("fp32", ":")):
        peaks = {r["peak"] for r in rows if r["peak_key"] == key and r["peak"]}
        for p in peaks:
            ax.axvline(p, color="firebrick", ls=style, lw=1, label=f"measured {key} peak {p:.3g} TFLOP/s")
    ax.set_xscale("log")
    ax.set_yticks(y, [r["label"] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("achieved TFLOP/s (FLOPs of one eager step / median step time), log scale")
    # beside the plot, never over a point
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return _save(fig, path)


SPAN = 4.0  # the summary chart shows the points and their intervals up to this factor beyond them


def summary_limits(points: list[float], bars: list[tuple[float, float]]) -> tuple[float, float]:
    """The summary chart's y range: every point and the no-change line, and the intervals up to SPAN
    beyond them; a wider interval (one wild process: 0.82x-342.94x) is cut at the edge and marked, so it
    cannot flatten every other cell."""
    low = min(min(points), 1.0) / SPAN
    high = max(max(points), 1.0) * SPAN
    ends = [v for lo, hi in bars for v in (lo, hi)] + list(points) + [1.0]
    return max(low, min(ends)) / 1.15, min(high, max(ends)) * 1.15


def summary(rows: list[dict], path: Path) -> Path | None:
    """Every ok cell's speedup with its 95% interval, one column per phase and mode (the verdict's
    groups), on a log scale with the no-change line: the whole run on one short chart.
    rows: group, speedup, lo, hi, verdict."""
    rows = [r for r in rows if r.get("speedup") and r["speedup"] > 0]
    if not rows:
        return None
    groups = list(dict.fromkeys(r["group"] for r in sorted(rows, key=lambda r: r["group"])))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.15 * len(groups) + 1.5), 3.0))
    colors = {"faster": "#2a8a2a", "slower": "#c0392b"}
    rng = np.random.default_rng(0)  # fixed jitter: the same chart every time
    # one artist per kind and colour, not two per cell: 10,000 cells drew 20,000 lines (25 s)
    bars: dict[str, list] = {}
    dots: dict[str, list] = {}
    for i, g in enumerate(groups):
        members = [r for r in rows if r["group"] == g]
        xs = i + (rng.uniform(-0.22, 0.22, len(members)) if len(members) > 1 else np.zeros(1))
        for x, r in zip(xs, members):
            color = colors.get(r.get("verdict"), "#888888")
            lo, hi = r.get("lo"), r.get("hi")
            if lo and hi and lo > 0 and not (math.isnan(lo) or math.isnan(hi)):
                bars.setdefault(color, []).append((x, lo, hi))
            dots.setdefault(color, []).append((x, r["speedup"]))
    for color, b in bars.items():
        x, lo, hi = zip(*b)
        ax.vlines(x, lo, hi, colors=color, alpha=0.45, linewidth=1.2)
    for color, d in dots.items():
        x, y = zip(*d)
        ax.plot(x, y, "o", linestyle="none", color=color, markersize=4)
    ax.axhline(1.0, color="#444444", linewidth=0.8, linestyle="--")
    ax.set_yscale("log")
    bottom, top = summary_limits([y for d in dots.values() for _, y in d], [(lo, hi) for b in bars.values()
                                                                            for _, lo, hi in b])
    ax.set_ylim(bottom, top)
    for color, b in bars.items():  # an interval cut at the edge: a marker there says so
        cut_hi = [x for x, _, hi in b if hi > top]
        cut_lo = [x for x, lo, _ in b if lo < bottom]
        if cut_hi:
            ax.plot(cut_hi, [top / 1.06] * len(cut_hi), "^", linestyle="none", color=color, markersize=5)
        if cut_lo:
            ax.plot(cut_lo, [bottom * 1.06] * len(cut_lo), "v", linestyle="none", color=color, markersize=5)
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([_wrap_mode(g) for g in groups], fontsize=8)
    ax.set_ylabel("speedup (eager / compiled)", fontsize=8)
    ax.set_title("every cell: speedup and 95% interval (green faster, red slower, grey no clear difference; "
                 "^ v an interval cut at the edge)", fontsize=9)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    return _save(fig, path)
