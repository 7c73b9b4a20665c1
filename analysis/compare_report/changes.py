"""What changed between two runs, answer first: the comparison's title, verdict, caveats, the list of
every called change by quantity, and the per-cell trend over three or more runs.

Reads the comparison's estimates (analysis/stats/estimates.py), computed once in analysis/compare_report/compare.py;
computes no statistic of its own except the run-level geometric means of the first-call times,
whose interval is the A/A run-level noise (estimates.run_level_bound).
"""
from __future__ import annotations

import json
import math

import numpy as np

from analysis.stats import attribution
from analysis.stats import estimates as est
from analysis.stats import pair_estimates as pe
from analysis.explain import kernels
from analysis.stats.fmt import cell_label
from analysis.data.load import Run, sql
from collector.record.contract import package_differences, suite_of

MAX_NAMED = 3  # cells named in a verdict line before "and N more"


def versions(a: Run, b: Run) -> tuple[str, str]:
    return str(a.env.get("torch_version") or a.run_id), str(b.env.get("torch_version") or b.run_id)


def device_words(a: Run, b: Run) -> str:
    names = {r.env.get("gpu_name") or r.env.get("device_name") or r.env.get("device") or "?" for r in (a, b)}
    return " / ".join(sorted(str(n) for n in names))


def title(a: Run, b: Run) -> str:
    va, vb = versions(a, b)
    if va != vb:
        return f"torch.compile: torch {vb} against {va} on {device_words(a, b)}"
    return f"torch.compile comparison: {b.run_id} against {a.run_id}"


def interleaved(a: Run, b: Run) -> bool:
    """True when the collector measured the two runs cell by cell in one session (run.json)."""
    return (b.run_id in a.manifest.get("interleaved_with", []) or a.run_id in b.manifest.get("interleaved_with", []))


def boots(r: Run) -> set:
    """The machine boots a run's sessions recorded (hostnames repeat across lent machines)."""
    return {x.get("boot_id") for x in r.manifest.get("sessions", []) if x.get("boot_id")}


def collector_sources(r: Run) -> set:
    """The hashes of the collector code that measured a run's sessions (run.json sessions)."""
    return {x.get("collector_source_sha1") for x in r.manifest.get("sessions", []) if x.get("collector_source_sha1")}


def build_kinds_differ(a: Run, b: Run) -> bool:
    """A CPU-only build against a CUDA build (say `2.13.0+cpu` and `2.14.1+cu130`)."""
    kinds = [v.split("+", 1)[1] if "+" in v else "plain" for v in versions(a, b)]
    return kinds[0] != kinds[1] and (kinds[0] == "cpu") != (kinds[1] == "cpu")


ONE_MACHINE_INTERLEAVED = "Measured on one machine, interleaved cell by cell with the order alternating: drift falls on both alike."


def how_measured(a: Run, b: Run) -> str:
    """One sentence: one machine interleaved (limits nothing: not a caveat), one machine in turn, or two machines."""
    ba, bb = boots(a), boots(b)
    if ba and bb and not (ba & bb):
        return ("Measured on different machines (no machine boot in common): host-bound step times differ "
                "between machines of one kind; read GPU-bound cells and compiled step times first.")
    if interleaved(a, b):
        return ONE_MACHINE_INTERLEAVED if len(ba | bb) <= 1 else (
            f"Measured interleaved cell by cell with the order alternating, on {len(ba | bb)} machines of one kind in "
            "turn (both versions in each collecting command): drift within a command falls on both alike; a cell "
            "whose pair was measured by another command, on another machine, carries that machine's difference too.")
    if ba and bb:
        return ("Measured on one machine, one run after the other (not interleaved): a drift of the machine "
                "between the two runs would read as a change.")
    return "Where the runs were measured is not recorded (runs from before the machine's boot id was kept)."


def subtitle(a: Run, b: Run) -> str:
    va, vb = versions(a, b)
    return (f"B = {b.run_id} (torch {vb}) against A = {a.run_id} (torch {va}), on {device_words(a, b)}. "
            + how_measured(a, b))


def _named(items: list[tuple[str, est.Estimate]]) -> str:
    items = sorted(items, key=lambda t: -abs(math.log(t[1].point)))
    text = ", ".join(f"{label} {est.pct(e.point)}" for label, e in items[:MAX_NAMED])
    return text + (f" and {len(items) - MAX_NAMED} more" if len(items) > MAX_NAMED else "")


def _counts(q: str, by: dict[str, est.Estimate], labels: dict[str, str], better: str, worse: str) -> str:
    imp = [(labels[c], e) for c, e in by.items() if e.call == est.IMPROVED]
    reg = [(labels[c], e) for c, e in by.items() if e.call == est.REGRESSED]
    parts = [f"{better} in {len(imp)}" + (f" ({_named(imp)})" if imp else ""),
             f"{worse} in {len(reg)}" + (f" ({_named(reg)})" if reg else "")]
    held: dict[str, int] = {}
    for e in by.values():
        if e.call.startswith("not called: "):
            held[e.call[len("not called: "):]] = held.get(e.call[len("not called: "):], 0) + 1
    tail = "".join(f"; {n} not called ({why})" for why, n in sorted(held.items()))
    return f"{est.QUANTITIES[q][0].capitalize()}: {'; '.join(parts)} of {len(by)} cells{tail}."


def _run_level(q: str, by: dict[str, est.Estimate]) -> str:
    """The geometric mean of a first-call ratio over cells, against the A/A run-level noise."""
    pts = [e.point for e in by.values() if e.point]
    if not pts:
        return f"{est.QUANTITIES[q][0].capitalize()}: not measured in both runs."
    g = float(np.exp(np.mean(np.log(pts))))
    noise = est.run_level_bound(q, len(pts))
    e = est.from_noise(q, g, noise, 0.0, "")
    beyond = [c for c, x in by.items() if x.called]
    word = {est.IMPROVED: "shorter", est.REGRESSED: "longer"}.get(e.call)
    head = (f"{est.QUANTITIES[q][0].capitalize()}: {word}, {est.pct(g)} (geometric mean of {len(pts)} cells; "
            f"such a mean moves up to ±{(math.exp(noise) - 1) * 100:.0f}% in A/A pairs)" if word else
            f"{est.QUANTITIES[q][0].capitalize()}: {est.pct(g)} over {len(pts)} cells, within the ±{(math.exp(noise) - 1) * 100:.0f}% "
            "such a mean moves in A/A pairs: no change called")
    held = sum(x.call == f"not called: {pe.BESIDE}" for x in by.values())
    tail = f"; per cell not called in {held} ({pe.BESIDE})" if held else ""
    return head + (f"; {len(beyond)} cell(s) beyond one cell's A/A spread" if beyond else "") + tail + "."


def verdict(a: Run, b: Run, ests: dict[str, dict[str, est.Estimate]], labels: dict[str, str],
            transitions: list, min_effect: float) -> list[str]:
    """The verdict box: one line per quantity a release note quotes."""
    va, vb = versions(a, b)
    lines = [f"torch {vb} against {va} on {device_words(a, b)}, {len(ests['compiled'])} paired compiled cells; "
             f"a change is called when its 95% interval excludes no change and it is at least {min_effect * 100:g}%."]
    lines.append(_counts("compiled", ests["compiled"], labels, "faster", "slower"))
    lines.append(_counts("eager", ests["eager"], labels, "faster", "slower"))
    lines.append(_counts("speedup", ests["speedup"], labels, "higher", "lower"))
    moved = attribution.verdict_line(ests, labels)
    if moved:
        lines.append(moved)
    lines.append(_run_level("cold", ests["cold"]))
    lines.append(_run_level("warm", ests["warm"]))
    lines.append(_counts("memory", ests["memory"], labels, "lower", "higher"))
    failing, beside = (sum(t[3] == kind for t in transitions) for kind in ("slower", "beside"))
    if transitions:
        lines.append(f"Status: {failing} cell(s) newly failing, {len(transitions) - failing - beside} newly passing" + (f", {beside} out of memory beside other cells on a shared GPU (not the model's need)." if beside else "."))
    return lines


def caveats(a: Run, b: Run, pairs: list[dict], ests: dict[str, dict[str, est.Estimate]]) -> list[str]:
    """What limits the verdict: how it was measured (but ONE_MACHINE_INTERLEAVED), builds, both sides moving, hosts."""
    out = [how] if (how := how_measured(a, b)) != ONE_MACHINE_INTERLEAVED else []
    both = [c for c, e in ests["compiled"].items()
            if e.called and c in ests["eager"] and ests["eager"][c].called and
            (e.point > 1) == (ests["eager"][c].point > 1)]
    if both:
        out.append(f"In {len(both)} cell(s) eager and compiled step times moved the same way: a cause both sides "
                   "share (the machine, its load, a library both use), not the compile; read their speedup change.")
    va, vb = versions(a, b)
    if build_kinds_differ(a, b):
        out.append(f"The builds differ in kind ({va} against {vb}): a CPU-only build and a CUDA build ship "
                   "different kernels and libraries even on the CPU.")
    sa, sb = collector_sources(a), collector_sources(b)
    if sa and sb and not (sa & sb):
        out.append(f"Collected by different collector code (source hash A {', '.join(sorted(sa))}, B "
                   f"{', '.join(sorted(sb))}): a change of protocol moves figures the way a new torch would "
                   "(docs/comparison.md, 'Across machines and collector versions').")
    out += _beside_caveats(pairs)
    out += _launch_bound_caveat(pairs)
    ca, cb = (r.env.get("host_calibration") or {} for r in (a, b))  # its figure ends torch's stack line if any
    host = (f"host dispatch of one eager op: A {ca['dispatch_us']:.2f} us, B {cb['dispatch_us']:.2f} us "
            "(it moves with torch and host: docs/measurement.md).") if ca.get("dispatch_us") and cb.get("dispatch_us") else ""
    out += (pkg := package_caveats(a, b, pairs, host))[0]
    out += _retuned_caveat(a, b, pairs, ests)
    ea, eb = (r.env.get("compile_env") for r in (a, b))
    if ea is not None and eb is not None and ea != eb:  # both recorded it (collected since 2026-12-02)
        out.append(f"The runs had other torch.compile settings in the environment (A: {ea or 'none'}; B: "
                   f"{eb or 'none'}): their figures differ by those settings as well as by the torch.")
    elif (ea is None) != (eb is None) and (ea or eb):  # one run is older than the record and the other set some
        have, other = ("A", "B") if ea else ("B", "A")
        out.append(f"{have} was collected with torch.compile settings in the environment ({ea or eb}); {other} did "
                   "not record its settings (collected before run.json kept them): if they differ, so do the figures.")
    if host and not pkg[1]:
        out.append(host[0].upper() + host[1:])
    return out


def _beside_caveats(pairs: list[dict]) -> list[str]:
    """Cells measured beside others on the host in one run only, and cells that took turns on one GPU in
    both (GPUS=0,0,0: turns for the timed sections, not for the compiles)."""
    out = []
    moved = [p for p in pairs if (p.get("beside_a") or 1) != (p.get("beside_b") or 1)]
    if moved:
        ex = moved[0]
        out.append(f"In {len(moved)} of {len(pairs)} cells the runs differ in how many cells measured at once on the "
                   f"host (concurrent_cells: e.g. {ex['cell_id']} A {ex.get('beside_a') or 1}, B "
                   f"{ex.get('beside_b') or 1}; GPU workers, shards or SLURM tasks on one node): a neighbour "
                   "slows launch-bound steps the way a new torch could; compare them with care.")
    both = [p for p in pairs if p.get("turns_a") and p.get("turns_b")]
    if both:
        n = max(max(int(p["beside_a"] or 1), int(p["beside_b"] or 1)) for p in both)
        out.append(f"In {len(both)} of {len(pairs)} cells both runs took turns on one GPU, up to {n} cells at once: "
                   "GPU-bound steps stay within 2% of alone there and launch-bound ones move with the host "
                   "(docs/scale-out.md); every cell compiled beside its neighbours' compiles, so no cell's cold or "
                   "warm first call is called, only their mean over cells.")
    return out


def _launch_bound_caveat(pairs: list[dict]) -> list[str]:
    """Cells with a launch-bound side, and which of their quantities is the precise one: the compiled
    step where only the eager side is launch-bound, the eager step where only the compiled side is,
    none where both are (the host sets both paces). One sentence (it stands on the first screen)."""
    lb = [p for p in pairs if p.get("eager_lb_a") or p.get("eager_lb_b")]
    both = [p for p in lb if p.get("compiled_lb_a") or p.get("compiled_lb_b")]
    only_compiled = [p for p in pairs if (p.get("compiled_lb_a") or p.get("compiled_lb_b")) and p not in lb]
    if not lb and not only_compiled:
        return []
    groups = ([f"{len(lb)} a launch-bound eager side"] if lb else []) + \
        ([f"{len(only_compiled)} a launch-bound compiled side only"] if only_compiled else [])
    precise = ([f"the compiled step in the {len(lb) - len(both)} with a GPU-bound compiled side"]
               if len(lb) > len(both) else []) + \
        ([f"the eager step in the {len(only_compiled)} launch-bound on the compiled side only"] if only_compiled else []) + \
        ([f"none in the {len(both)} launch-bound on both sides (read their intervals)"] if both else [])
    return [f"Of {len(pairs)} cells, {' and '.join(groups)}: the host's noise is in their speedup changes; the "
            f"precise quantity is {'; '.join(precise)}."]


STACK = "torch's own stack moved with it ("


def _native_stack(a: Run, b: Run) -> list[tuple[str, object, object]]:
    """The CUDA runtime and cuDNN (92400: 9.24.0) of each run where both recorded them and they differ: a
    carried torch brings its own, and a convolution's engines move with cuDNN, not with torch's code."""
    cudnn = (lambda v: f"{v // 10000}.{v % 10000 // 100}.{v % 100}")  # noqa: E731
    got = [(label, *(fmt(r.env[key]) if r.env.get(key) else None for r in (a, b)))
           for key, label, fmt in (("cuda", "CUDA", str), ("cudnn", "cuDNN", cudnn))]
    return [(label, x, y) for label, x, y in got if x and y and x != y]


def _stack_line(stack: list[tuple[str, object, object]], host: str) -> str:
    """torch's own stack that moved with it, the host's dispatch figure (if any) ending the same line."""
    return (STACK + ", ".join(f"{k} {x or 'none'} against {y or 'none'}" for k, x, y in stack) + ")"
            + ("; " + host if host else "."))


def package_caveats(a: Run, b: Run, pairs: list[dict], host: str = "") -> tuple[list[str], bool]:
    """The model packages (transformers, timm, numpy: what builds the models beside torch): which differ
    between the runs, or that a run of real models did not record them (collected before run.json kept
    them). torch's own stack (Triton, torchvision, CUDA, cuDNN) is named apart, in a line `host` ends (flagged)."""
    pa, pb = (r.env.get("model_packages") for r in (a, b))
    native = _native_stack(a, b)
    if pa and pb:
        libs = package_differences(pa, pb)
        stack = [d for d in package_differences(pa, pb, torch_stack=True) if d not in libs] + native
        out = []
        if libs:
            out.append("The model packages differ (" + ", ".join(f"{k} {x or 'none'} against {y or 'none'}"
                                                           for k, x, y in libs)
                       + "): a model library can change the program it hands torch.compile with its own version "
                       "or with torch's (the captured graph, below), so a change here is not the torch's alone.")
        if stack:
            out.append(_stack_line(stack, host))
        return out, bool(stack)
    out = [_stack_line(native, host)] if native else []
    if any(suite_of(p.get("model") or "") != "builtin" for p in pairs):
        missing = " and ".join(r.run_id for r, pk in ((a, pa), (b, pb)) if not pk)
        out.append(f"{missing} did not record the versions of the packages that built the models (transformers, "
                   "timm: not recorded, collected before run.json kept them): a difference there would move "
                   "figures as a new torch does, and this comparison cannot rule it out.")
    return out, bool(native)


def _called_step(ests: dict[str, dict[str, est.Estimate]], cid: str) -> list[est.Estimate]:
    """The cell's called compiled-step and speedup changes."""
    return [x for x in (ests.get(q, {}).get(cid) for q in ("compiled", "speedup")) if x is not None and x.called]


def retuned_cells(pairs: list[dict], ests: dict[str, dict[str, est.Estimate]]) -> list[tuple]:
    """Called compiled or speedup changes in cells whose cold compiles autotuned other launch configurations (one
    torch in both runs: kernel names match; schema v8 records in both), as (pair, retuned, split A, split B,
    carried). Every process of a run shares its cold compile's choices through the cache, so the
    processes' spread cannot hold them; not so where both runs compiled every process cold
    (COLD_REPLICATES=1), whose intervals hold the draw. Where both runs profiled the cell, only if the
    re-tuned kernels carried the change (kernels.retuned_carried); unprofiled, the records alone cannot tell."""
    hit = []
    for p in pairs:
        if p.get("rep_cache_a") == "cold" and p.get("rep_cache_b") == "cold":
            continue  # COLD_REPLICATES in both runs: every process drew its own, the intervals hold the draw
        # a called compiled change, or a called speedup change (its compiled step launch-bound, say)
        r = kernels.retuned(p.get("autotune_a"), p.get("autotune_b")) if _called_step(ests, p["cell_id"]) else None
        if r is None or not r.changed:
            continue
        sa = kernels.splits(p.get("profile_a"), {"compiled": p.get("compiled_a")}).get("compiled")
        sb = kernels.splits(p.get("profile_b"), {"compiled": p.get("compiled_b")}).get("compiled")
        carried = kernels.retuned_carried(r, sa, sb)
        if carried is not False:
            hit.append((p, r, sa, sb, carried))
    return hit


def draw_unheld(hit: list[tuple], ests: dict[str, dict[str, est.Estimate]]) -> list[tuple]:
    """Of retuned_cells' hits, those whose called changes' intervals hold only the processes' spread (no
    sibling runs' spread, analysis/stats/history.py): the interval cannot show the compile's draw."""
    return [h for h in hit if not all("sibling runs" in (x.reason or "") for x in _called_step(ests, h[0]["cell_id"]))]


def _retuned_caveat(a: Run, b: Run, pairs: list[dict], ests: dict[str, dict[str, est.Estimate]]) -> list[str]:
    """The line for retuned_cells' hits: a hint across versions (a name can be another kernel), a caveat
    within one, saying whether each interval holds the draw (docs/diagnostics.md, 'The autotune record')."""
    same = versions(a, b)[0] == versions(a, b)[1]
    hit = retuned_cells(pairs, ests)
    if not hit:
        return []
    p, r, sa, sb, carried = hit[0]
    k, ca, cb = kernels.most_moved(r, sa, sb)
    if not same:
        return [f"In {len(hit)} cell(s) with a called compiled change the two cold compiles autotuned kernels of one "
                f"name differently (e.g. {cell_label(p)}: {len(r.changed)} of {r.compared}); across versions a name "
                "can be another kernel, so this is a hint, not a finding (docs/diagnostics.md, 'The autotune record')."]
    which = (f"the one whose time moved most: {k}, {kernels.config_change(ca, cb)}" if carried else
             f"e.g. {k}, {kernels.config_change(ca, cb)}; not profiled in both runs, so whether they carried "
             "the change is not known")
    # the interval holds the draw only where sibling runs' spread is in it (analysis/stats/history.py)
    unheld = draw_unheld(hit, ests)
    holds = ("its interval holds the run-to-run spread of sibling runs, the draw among it" if not unheld else
             f"the interval of {len(unheld)} of them holds only its processes' spread, which cannot show "
             "that draw: repeat the runs (three sibling runs put their spread in the interval), or collect "
             "both with COLD_REPLICATES=1, whose intervals hold the draw")
    return [f"In {len(hit)} cell(s) with a called compiled or speedup change Inductor's autotuning chose other launch "
            f"configurations in the two runs' cold compiles (e.g. {cell_label(p)}: {len(r.changed)} of {r.compared} "
            f"kernels; {which}). Every process of a run shares its cold compile's "
            f"choices, so such a change can be the draw of one compile, not a change of the code; {holds} "
            "(docs/diagnostics.md, 'The autotune record')."]


def called_rows(pairs: list[dict], ests: dict[str, dict[str, est.Estimate]], labels: dict[str, str],
                fmt: dict) -> tuple[list[tuple], list[tuple]]:
    """Every called change of every quantity: (label, quantity, A, B, estimate) for regressions and
    improvements, the larger changes first. `fmt`: quantity -> (pair column of A, of B, formatter)."""
    reg, imp = [], []
    by_id = {p["cell_id"]: p for p in pairs}
    for q, by in ests.items():
        col_a, col_b, f = fmt[q]
        for cid, e in by.items():
            if e.called:
                p = by_id[cid]
                row = (labels[cid], q, f(p.get(col_a)), f(p.get(col_b)), e)
                (imp if e.call == est.IMPROVED else reg).append(row)
    order = list(est.QUANTITIES)
    key = (lambda r: (order.index(r[1]), -abs(math.log(r[4].point))))
    return sorted(reg, key=key), sorted(imp, key=key)


DIAG_FIELDS = (("graphs", "graphs"), ("breaks", "graph breaks"), ("recompiles", "recompiles"),
               ("cg_skips", "CUDA-graph skips"), ("kernels", "kernels"))
REASON_FIELDS = ("break_reasons", "recompile_reasons", "cg_reasons")


def diagnostic_changes(pairs: list[dict]) -> tuple[list[tuple[str, str, str]], int]:
    """Per paired compiled cell: counts that differ between A and B, and the reasons B has that
    A had not (a new graph break, a new recompile reason). Returns (rows, cells compared)."""
    rows, known = [], 0
    for p in pairs:
        if p["mode"] == "eager" or p.get("recompiles_a") is None or p.get("recompiles_b") is None:
            continue  # schema < 3 (or a torch that could not tell): not all four counts are known
        known += 1
        changed = [f"{name} {int(p[k + '_a'])} -> {int(p[k + '_b'])}" for k, name in DIAG_FIELDS
                   if p.get(k + "_a") is not None and p.get(k + "_b") is not None and p[k + "_a"] != p[k + "_b"]]
        new = []
        for k in REASON_FIELDS:
            try:
                old = set(json.loads(p.get(k + "_a") or "{}"))
                new += [r for r in json.loads(p.get(k + "_b") or "{}") if r not in old]
            except (TypeError, ValueError):
                continue
        if changed or new:
            rows.append((cell_label(p), "; ".join(changed) or "same counts", "; ".join(new)))
    return rows, known


def _trend_text(compiled: float, speedup: float, kernels: int | None) -> str:
    return f"{compiled:.3f} ms ({speedup:.2f}x{'' if kernels is None else f', {kernels} kernels'})"


def trend_cells(con, runs: list[Run]) -> tuple[list[tuple[str, list[str]]], list[dict]]:
    """Per cell over 3+ runs: its compiled step time and speedup in each run (text, with the kernels
    Inductor generated where the run recorded them), and chart rows (label, compiled step time
    relative to the first run that has it)."""
    ids = [r.run_id for r in runs]
    got: dict[str, dict[str, tuple]] = {}
    labels = {}
    for run_id, cid, label, compiled, speedup, n_kernels in con.execute(sql("trend_cells"), {"runs": ids}).fetchall():
        got.setdefault(cid, {})[run_id] = (compiled, speedup, n_kernels)
        labels[cid] = label
    table, chart = [], []
    for cid in sorted(got, key=lambda c: labels[c]):
        per = got[cid]
        table.append((labels[cid], [_trend_text(*per[r]) if r in per else "-" for r in ids]))
        first = next((per[r][0] for r in ids if r in per), None)
        if first and len(per) >= 2:
            chart.append({"label": labels[cid], "values": [per[r][0] / first if r in per else None for r in ids]})
    return table, chart
