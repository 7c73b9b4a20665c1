"""What a suite screen can resolve, from a designed A/A and a planted change of known size.

    python benchmarks/screen_resolution.py RUN [--data data/examples] [--confirm RUNc]

RUN-a and RUN-b are one torch screened twice (the A/A), RUN-p the same with every compiled step slowed
by a known share (PLANT_SLOWDOWN, `benchmarks/gpu_machine/versions_gpu.sh resolve`), interleaved cell by
cell, one process a cell. Per cell, its class (host-paced where a side is launch-bound in any of the
three screens by the enqueue rule, else GPU-bound), the A/A's change and the plant's change of the
compiled step, the eager step, the speedup and the cold compile. Per class: the A/A's largest change of
each quantity (the threshold `make confirm AA=` gives that class) and how many planted cells moved
beyond it (sent to confirmation).

With --confirm, RUNc-a, RUNc-b and RUNc-p (the moved cells again under the three interpreters, several
processes each): per quantity the calls of the comparison on the A/A (false calls) and on the plant, and
what `make gate` says of each (pass, unverified or fail). docs/validation.md quotes the output.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.commands import screen  # noqa: E402
from analysis.data.load import discover_runs, load, sql  # noqa: E402
from analysis.run_report.context import prepare  # noqa: E402
from analysis.stats import estimates as est, pair_estimates  # noqa: E402

QUANTITIES = (("compiled", "compiled step"), ("eager", "eager step"), ("speedup", "speedup"), ("cold", "cold compile"))


def change(p: dict, q: str) -> float | None:
    """B/A - 1 of quantity q in a pair row, None where either side is missing."""
    a, b = p.get(f"{q}_a"), p.get(f"{q}_b")
    if not all(isinstance(x, (int, float)) and x > 0 for x in (a, b)):
        return None
    return b / a - 1


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def side_run(runs: dict, base: str, side: str):
    """RUN-<side>, where the plant's side may be named p<N> (p5, p10)."""
    names = [f"{base}-{side}"] if side != "p" else sorted(r for r in runs if r.startswith(f"{base}-p"))
    for n in names:
        if n in runs:
            return runs[n]
    raise SystemExit(f"no run {base}-{side}{'<N>' if side == 'p' else ''} among {len(runs)} runs")


def screen_table(loaded, a, b, p) -> list[str]:
    def pairs(x, y):
        df = loaded.con.execute(sql("compare_pairs"), {"baseline": x.run_id, "candidate": y.run_id}).df()
        return {r["cell_id"]: r for r in df.astype(object).where(df.notna(), None).to_dict("records")}
    aa, pl = pairs(a, b), pairs(a, p)
    plant_pct = (p.manifest.get("protocol") or {}).get("plant_slowdown_pct")
    out = [f"screen {a.run_id} / {b.run_id} (A/A) and {a.run_id} / {p.run_id} (+{plant_pct}% planted): "
           f"{len(aa)} cells", "",
           "| cell | class | A/A compiled | A/A eager | A/A speedup | A/A cold | planted compiled | planted speedup |",
           "|---|---|---|---|---|---|---|---|"]
    classes: dict[str, list[str]] = {c: [] for c in screen.CLASSES}
    # what `make confirm AA=` sends: the plant's moves beyond the class's A/A spread (screen.moved)
    sent = {m.cell_id for m in screen.moved(list(pl.values()), screen.aa_spread(list(aa.values())))}
    for cid, r in aa.items():
        q = pl.get(cid, {})
        if "ok" != r["status_a"] or "ok" != r["status_b"] or q.get("status_b") != "ok":
            out.append(f"| {cid} | - | {r['status_a']} / {r['status_b']} / {q.get('status_b')} | | | | | |")
            continue
        cls = screen.CLASSES[1] if screen.paced(r) or screen.paced(q) else screen.CLASSES[0]
        classes[cls].append(cid)
        out.append(f"| {cid} | {cls} | " + " | ".join(pct(change(r, k)) for k, _ in QUANTITIES)
                   + f" | {pct(change(q, 'compiled'))} | {pct(change(q, 'speedup'))} |")
    out.append("")
    for cls, ids in classes.items():
        if not ids:
            out.append(f"{cls}: no cell")
            continue
        spread = {k: max(abs(math.log1p(change(aa[c], k))) for c in ids if change(aa[c], k) is not None)
                  for k, _ in QUANTITIES}
        text = ", ".join(f"{name} {100 * math.expm1(spread[k]):.1f}%" for k, name in QUANTITIES)
        moved = [c for c in ids if c in sent]
        planted = sorted(change(pl[c], "compiled") for c in ids)
        out.append(f"{cls}: {len(ids)} cells; the A/A's largest change: {text}; the planted compiled step "
                   f"{pct(planted[0])} to {pct(planted[-1])} (median {pct(planted[len(planted) // 2])}); "
                   f"beyond the class's A/A spread (sent to confirmation): {len(moved)} of {len(ids)}"
                   + (f" ({', '.join(moved)})" if moved else ""))
    return out


def confirm_table(loaded, a, b, p) -> list[str]:
    from benchmarks.false_alarms import gate_verdict
    out = []
    for x, y, what in ((a, b, "A/A"), (a, p, "planted")):
        pe = pair_estimates.estimate_pair(loaded, x, y)
        calls = []
        for q, by in pe.ests.items():
            called = [f"{pe.labels[cid]} {est.pct(e.point)}" for cid, e in by.items() if e.called]
            judged = [cid for cid, e in by.items() if cid in pe.callable_ids and e.call != "-"]
            if judged:
                calls.append(f"{q}: {len(called)} called of {len(judged)}" + (f" ({'; '.join(called)})" if called else ""))
        said, lines = gate_verdict(pe)
        out.append(f"confirmation {what} {x.run_id} / {y.run_id}: {len(pe.callable_ids)} cells timed in several "
                   f"processes in both; " + "; ".join(calls))
        out.append(f"  make gate: {said}" + (f" ({'; '.join(lines)})" if lines else ""))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="the screens' run id stem: RUN-a, RUN-b, RUN-p<N>")
    ap.add_argument("--data", default="data/examples")
    ap.add_argument("--confirm", help="the confirmation's run id stem: RUNc-a, RUNc-b, RUNc-p<N>")
    args = ap.parse_args(argv)
    runs = {r.run_id: r for r in discover_runs(Path(args.data))}
    stems = [args.run] + ([args.confirm] if args.confirm else [])
    trio = {s: [side_run(runs, s, side) for side in ("a", "b", "p")] for s in stems}
    loaded = load([r for t in trio.values() for r in t])
    prepare(loaded)
    lines = screen_table(loaded, *trio[args.run])
    if args.confirm:
        lines += [""] + confirm_table(loaded, *trio[args.confirm])
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
