"""The comparison's false-alarm and miss rates, measured on the committed runs.

    python benchmarks/false_alarms.py [--data data/examples] [--pairs] [--min-effect 0.02]

Same-torch pairs: every two runs in data/examples of one device and one torch build on one machine
(a boot in common), collected alike (the same workers), neither with a plant, that the comparison
accepts without --allow-mismatch (one preset, one protocol) and that share a cell timed in several
processes in both. Nothing changed
between them but the machine's state and the hour, so every call made on them is a false alarm. Per
quantity the script prints how many of their paired cells could be called (a cell timed in
several processes in both runs, a side that is not launch-bound) and how many were.

Planted pairs: a run with a planted slowdown of the compiled step (PLANT_SLOWDOWN, >= 5%) against an
unplanted run of the same device, torch, machine, preset and protocol otherwise. Runs that put two
or more cells on one GPU at a time (`GPUS=0,0`) are left out of both: another protocol, checked on its own. Per planted cell whose
compiled side is not launch-bound in either run (GPU-bound, where the plant is the GPU time it adds):
is its compiled-step change called a regression? A miss is listed.

docs/statistics.md ("The false-alarm budget") and docs/validation.md quote the output.
"""
from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.stats import estimates as est, pair_estimates, core as stats

from analysis.commands import gate  # noqa: E402
from analysis.compare_report import verify  # noqa: E402
from analysis.compare_report.compare import check_comparable  # noqa: E402
from analysis.run_report.context import prepare  # noqa: E402
from analysis.stats import history  # noqa: E402
from analysis.stats.history import History  # noqa: E402
from analysis.data.load import discover_runs, load  # noqa: E402

PLANT_KEYS = ("plant_slowdown_pct", "plant_compile_ms", "plant_delay_ms")
GATE_BOUND = 0.05  # `make gate`'s default --max-regression
GATE_BELOW = 0.02  # a bound below every plant: a planted pair must fail there
MIN_PLANT = 5


def plant(run) -> dict:
    return {k: v for k, v in run.manifest.get("protocol", {}).items() if k in PLANT_KEYS and v}


def without_plant(run) -> dict:
    return {k: v for k, v in run.manifest.get("protocol", {}).items() if k not in PLANT_KEYS and k != "timeout_s"}


def boots(run) -> set:
    """The boots of the machine(s) the run was collected on (run.json's environment and sessions)."""
    got = {run.env.get("boot_id")} | {s.get("boot_id") for s in run.manifest.get("sessions") or []}
    return got - {None, ""}


def setup(run) -> tuple:
    """How the run's cells were collected: per command, its workers (GPU and CPU binding). Two runs
    collected differently (one worker against two beside each other) are not the same thing twice."""
    return tuple(sorted({tuple((w.get("gpu"), tuple(w.get("cpus") or ())) for w in s.get("workers") or [])
                         for s in run.manifest.get("sessions") or []}, key=str))


def shares_gpu(run) -> bool:
    """Whether a command of the run put two cells on one device (GPUS=0,0: workers sharing a timing lock;
    benchmarks/turns_cpu.py does so on the CPU): another protocol, whose own A/A and plant are
    docs/validation.md's, not this budget's."""
    return history.sharing(run) != ((1, False),)


def groups(runs) -> dict:
    """(device name, torch build) -> runs, for runs with a manifest and cells, one cell a GPU."""
    out = defaultdict(list)
    for r in runs:
        env = r.env
        if r.files and env.get("device_name") and env.get("torch_version") and not shares_gpu(r):
            out[(env["device_name"], env["torch_version"])].append(r)
    return out


def gate_verdict(pe, bound: float = GATE_BOUND, min_effect: float = stats.MIN_EFFECT) -> tuple[str, list[str]]:
    """What `make gate` (every quantity, `bound`) says of the pair: ("fail" | "unverified" | "pass", the
    changes behind it); unverified: every change beyond the bound is of a kind an A/A produces
    (analysis/compare_report/verify.py)."""
    rows = [{"cell_id": cid, "cell": pe.labels[cid], "quantity": q, "ratio": e.point, "call": e.call}
            for q, by in pe.ests.items() for cid, e in by.items() if e.point]
    why = verify.unverified(pe.a, pe.b, pe.pairs, pe.ests, min_effect)
    failing, held = gate.split_unverified(gate.beyond(rows, bound), why)
    failing += gate.run_level_first_call(rows, bound)
    broken = gate.newly_failing([(pe.labels[p["cell_id"]], p["status_a"], p["status_b"]) for p in pe.pairs])
    if failing or broken:
        return "fail", [f"{c['cell']} {c['quantity']} {est.pct(c['ratio'])}" for c in failing] + [
            f"newly failing {x}" for x in broken]
    return ("unverified" if held else "pass"), [
        f"{c['cell']} {c['quantity']} {est.pct(c['ratio'])} ({reason.split(':')[0]})" for c, reason in held]


def measure(data: Path, min_effect: float, show_pairs: bool, with_history: bool = True) -> dict:
    runs = discover_runs(data)
    hist = History(runs) if with_history else None  # every run of the folder, as the report has them
    callable_n, called_n = defaultdict(int), defaultdict(int)
    false_calls: list[str] = []
    planted: list[tuple[str, str, str, bool]] = []  # (pair, cell, change, called)
    n_pairs = 0
    gate_aa: list[str] = []  # A/A pairs (either order) the gate fails
    gate_planted: list[tuple[str, bool]] = []  # GPU planted pairs and whether the gate failed them
    run_level: dict[str, list] = {"cold": [], "warm": []}  # per pair: |mean ln B/A| of the first calls
    for (device, torch), members in sorted(groups(runs).items()):
        clean = [r for r in members if not plant(r)]
        aa = [(a, b) for a, b in combinations(sorted(clean, key=lambda r: r.run_id), 2)
              if not check_comparable(a, b) and boots(a) & boots(b) and setup(a) == setup(b)]
        pl = [(a, b) for a in clean for b in members
              if plant(b).get("plant_slowdown_pct", 0) >= MIN_PLANT and set(plant(b)) == {"plant_slowdown_pct"}
              and boots(a) & boots(b) and setup(a) == setup(b)
              and a.manifest.get("preset") == b.manifest.get("preset") and without_plant(a) == without_plant(b)
              and not [d for d in check_comparable(a, b) if not d.startswith("protocol plant")]]
        if not aa and not pl:
            continue
        used = sorted({r.run_id: r for pair in aa + pl for r in pair}.values(), key=lambda r: r.run_id)
        loaded = load(used)
        prepare(loaded)
        for a, b in aa:
            pe = pair_estimates.estimate_pair(loaded, a, b, min_effect=min_effect, history=hist)
            if not pe.callable_ids:
                continue
            n_pairs += 1
            got = []
            for q, by_cell in pe.ests.items():
                for cid, e in by_cell.items():
                    if cid not in pe.callable_ids or e.call == "-" or e.call.endswith("launch-bound side"):
                        continue  # what the data cannot carry; a call withheld at the run level counts
                    callable_n[q] += 1
                    if e.called:
                        called_n[q] += 1
                        got.append(f"{q} {pe.labels[cid]} {est.pct(e.point)} ({est.interval_text(e)})")
                        false_calls.append(f"{a.run_id} / {b.run_id}: {got[-1]}")
            if show_pairs:
                print(f"A/A {a.run_id} / {b.run_id}: {len(pe.callable_ids)} cells, {len(got)} called")
            for q in ("cold", "warm"):  # the verdict's run-level line: the geometric mean against the A/A shift
                pts = [e.point for e in pe.ests[q].values() if e.point]
                if pts:
                    g = sum(math.log(x) for x in pts) / len(pts)
                    run_level[q].append((abs(g), len(pts), f"{a.run_id} / {b.run_id} {est.pct(math.exp(g))} over {len(pts)} cells"))
            for x, y, e in ((a, b, pe), (b, a, pair_estimates.estimate_pair(loaded, b, a, min_effect=min_effect, history=hist))):
                said, lines = gate_verdict(e, min_effect=min_effect)
                if said != "pass":
                    gate_aa.append((said, f"{y.run_id} against {x.run_id}: {'; '.join(lines)}"))
        for a, b in pl:
            pe = pair_estimates.estimate_pair(loaded, a, b, min_effect=min_effect, history=hist)
            pct = plant(b)["plant_slowdown_pct"]
            bound = 0
            for cid, e in pe.ests["compiled"].items():
                if cid not in pe.callable_ids or e.call.endswith("launch-bound side"):
                    continue  # host-paced: never called; a call withheld for any other reason is a miss
                bound += 1
                planted.append((f"{a.run_id} / {b.run_id} (+{pct}%)", pe.labels[cid], est.pct(e.point),
                                e.call == est.REGRESSED, a.env.get("device") == "cuda"))
            if bound and a.env.get("device") == "cuda":  # a pair with planted GPU-bound cells
                gate_planted.append((f"{b.run_id} against {a.run_id} (+{pct}%)",
                                     gate_verdict(pe, min_effect=min_effect)[0],
                                     gate_verdict(pe, GATE_BELOW, min_effect)[0]))
    return {"pairs": n_pairs, "callable": dict(callable_n), "called": dict(called_n), "false": false_calls,
            "planted": planted, "gate_aa": gate_aa, "gate_planted": gate_planted, "run_level": run_level}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "data" / "examples"))
    ap.add_argument("--min-effect", type=float, default=stats.MIN_EFFECT)
    ap.add_argument("--pairs", action="store_true", help="a line per same-torch pair")
    ap.add_argument("--without-history", action="store_true",
                    help="each run's interval from its processes alone (no sibling runs' spread, analysis/stats/history.py)")
    args = ap.parse_args(argv)
    got = measure(Path(args.data), args.min_effect, args.pairs, not args.without_history)
    show_missed_cpu = args.pairs
    print(f"same-torch pairs: {got['pairs']}")
    print(f"{'quantity':<34} {'callable cells':>14} {'called':>7} {'share':>7}")
    for q, (name, _) in est.QUANTITIES.items():
        n, c = got["callable"].get(q, 0), got["called"].get(q, 0)
        print(f"{name:<34} {n:>14} {c:>7} {(c / n if n else 0):>7.1%}")
    for line in got["false"]:
        print(f"  false alarm: {line}")
    for gpu, where in ((True, "GPU-bound cells (CUDA, compiled side not launch-bound)"),
                       (False, "CPU cells (every side host-bound: shown, not a target)")):
        rows = [p for p in got["planted"] if p[4] == gpu]
        print(f"planted >= {MIN_PLANT}% compiled slowdowns, {where}: {sum(p[3] for p in rows)} of {len(rows)} called")
        for pair, cell, change, ok, _ in rows:
            if not ok and (gpu or show_missed_cpu):
                print(f"  missed: {pair} {cell} {change}")
    for q, shifts in got["run_level"].items():
        over = sorted((x for x in shifts if x[0] > est.run_level_bound(q, x[1])), reverse=True)
        wide = max(x[0] for x in shifts if x[1] >= 3)
        print(f"run-level {q} first call: called in {len(over)} of {len(shifts)} same-torch pairs (bound x/"
              f"{math.exp(est.FIRST_CALL_RUN_BOUND[q]):.2f}, or one cell's / sqrt(cells) where larger); largest "
              f"shift of a pair of 3 or more cells |mean ln B/A| {wide:.3f}")
        for _, _, line in over:
            print(f"  run-level {q} call: {line}")
    fails = [line for said, line in got["gate_aa"] if said == "fail"]
    held = [line for said, line in got["gate_aa"] if said == "unverified"]
    planted = got["gate_planted"]
    print(f"make gate at its defaults (every quantity, {GATE_BOUND:.0%}): of {2 * got['pairs']} same-torch "
          f"comparisons (each pair both ways) fails {len(fails)}, unverified (exit 4) {len(held)}; of "
          f"{len(planted)} planted GPU pairs fails {sum(p[1] == 'fail' for p in planted)}, unverified "
          f"{sum(p[1] == 'unverified' for p in planted)}; at --max-regression {GATE_BELOW:.0%} fails "
          f"{sum(p[2] == 'fail' for p in planted)}, unverified {sum(p[2] == 'unverified' for p in planted)} "
          f"of {len(planted)}")
    for line in fails:
        print(f"  gate fails an A/A: {line}")
    for line in held:
        print(f"  gate says unverified of an A/A: {line}")
    for pair, said, below in planted:
        if said != "fail" or below != "fail":
            print(f"  planted pair {pair}: at {GATE_BOUND:.0%} {said}, at {GATE_BELOW:.0%} {below}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
