"""Where a step's time goes, from the kernel profile (collector/child/profile.py, `PROFILE=1`).

Per side, the profile gives the kernels' device time a step (on the CPU: the operators' self time);
beside the timed step (the median over every process) it splits the step into the part the device
spent in kernels and the rest: launch gaps and host work the device waited for. Between two runs
the same split says whether a step-time change happened in the kernels (and in which kinds and which
kernels by name) or beside them, on the host. The profile comes from one process a run (the cold
one, after timing): it attributes a change the step-time estimates call; it calls nothing itself.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from analysis.stats.core import DISAGREE, MIN_EFFECT
from collector.record.contract import autotune_differences, autotune_processes, autotune_record, is_annotation

SIDES = ("eager", "compiled")
SHARE = 0.5  # a part "carries" a step change when it moved the same way by at least this share of it
STEADY = MIN_EFFECT  # a step change below the minimum effect (2%) is "unchanged"
TOP_MOVED = 3


@dataclass(frozen=True)
class Split:
    """One side of one cell: the timed step, the kernels' time a step and what they are."""

    step_ms: float
    kernel_ms: float
    kinds: dict  # kind -> ms a step
    kernels: dict  # name -> (kind, calls a step, ms a step), the largest names the profile kept
    device: str  # cuda or cpu
    host_ms: float | None = None  # on a GPU: the host operators' self CPU time a step, under the profiler
    host_ops: dict = None  # name -> (kind, calls a step, ms a step), the largest host operators

    @property
    def rest_ms(self) -> float:
        """The part of the step outside the kernels (launch gaps, host work); negative where the
        profiled kernels outlast the timed step (steps overlapping in the queue)."""
        return self.step_ms - self.kernel_ms

    @property
    def busy(self) -> float:
        return self.kernel_ms / self.step_ms


def _named(entries: list[dict], skip=lambda name: False, rename=lambda name: name) -> dict:
    """{name: (kind, calls a step, ms a step)} of a profile's kernels or host operators; entries that
    `rename` gives one name are summed."""
    out: dict = {}
    for k in entries:
        if skip(k["name"]):
            continue
        name = rename(k["name"])
        kind, calls, ms = out.get(name, (k["kind"], 0.0, 0.0))
        out[name] = (kind, calls + k["calls"], ms + k["us"] / 1e3)
    return out


_GRAPH_HASH = re.compile(r"(CompiledFxGraph) \w{16,}")


def host_name(name: str) -> str:
    """A host range's name without the compiled graph's content hash ("## Call CompiledFxGraph
    fvc4echd... ##" -> "## Call CompiledFxGraph ##"): the hash changes with every torch version and
    code change, the wrapper's cost is what is compared."""
    return _GRAPH_HASH.sub(r"\1", name)


def splits(raw: str | None, step_ms: dict) -> dict[str, Split]:
    """{side: Split} of a kernel profile (kernel_profile_json) beside each side's timed median step
    (`step_ms`: {side: ms}); empty without a profile, or an unreadable one."""
    if not raw:
        return {}
    try:
        prof = json.loads(raw)
    except (TypeError, ValueError):
        return {}
    out = {}
    for side in SIDES:
        rec, step = prof.get(side), step_ms.get(side)
        if not rec or not step:
            continue
        device = rec.get("device", "cuda")
        kinds = {k: v / 1e3 for k, v in rec["kinds"].items()}
        total = rec["us_per_step"] / 1e3
        if device == "cuda":  # ranges the first profiles (2026-12-02, before the collector dropped them) counted as kernels
            for k in rec["kernels"]:
                if is_annotation(k["name"]):
                    total -= k["us"] / 1e3
                    kinds[k["kind"]] -= k["us"] / 1e3
        host = rec.get("host") or {}
        out[side] = Split(step, total, {k: v for k, v in kinds.items() if v > 1e-9},
                          _named(rec["kernels"], is_annotation if device == "cuda" else lambda name: False), device,
                          host["us_per_step"] / 1e3 if host else None, _named(host.get("ops", []), rename=host_name))
    return out


def row_splits(row: dict) -> dict[str, Split]:
    """splits() of a stats row (its profile and its sides' medians)."""
    return splits(row.get("kernel_profile_json"), {side: row.get(f"{side}_median_ms") for side in SIDES})


def _ms(v: float) -> str:
    return f"{v:.3f}" if abs(v) < 10 else f"{v:.2f}"


def _kinds(s: Split, n: int = 3) -> str:
    top = sorted(s.kinds.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"{k} {_ms(v)}" for k, v in top if v > 0)


@dataclass(frozen=True)
class RunRow:
    label: str
    side: str
    step: str
    kernels: str
    busy: str
    kinds: str
    top: str


def run_rows(rows: list[dict], label) -> list[RunRow]:
    """The run report's table: per profiled cell and side, step, kernel time, busy share, kinds."""
    out = []
    for r in rows:
        for side, s in row_splits(r).items():
            top = "-"
            if s.kernels:
                name, (_, calls, ms) = max(s.kernels.items(), key=lambda kv: kv[1][2])
                top = f"{short(name)} ({_ms(ms)} ms, {calls:g} a step)"
            busy = f"{s.busy:.0%}" if s.device == "cuda" else "-"  # CPU: the profiler's cost is in it (where())
            out.append(RunRow(label(r), side, _ms(s.step_ms), _ms(s.kernel_ms), busy, _kinds(s), top))
    return out


CPU_NOTE = "not attributed on the CPU"


def where(a: Split, b: Split) -> str:
    """Which part of the step carried its change from a to b: the kernels, the rest, both, or none.
    On the CPU, none: the operators' self time under the profiler carries the profiler's own cost per
    operator (1.1 to 19.5 ms a step for a 1.0-1.4 ms MLP step in the kp-cpu runs), so the split would
    be the profiler's, not the step's."""
    if a.device != "cuda" or b.device != "cuda":
        return CPU_NOTE
    d_step, d_kern, d_rest = b.step_ms - a.step_ms, b.kernel_ms - a.kernel_ms, b.rest_ms - a.rest_ms
    if abs(d_step) < STEADY * a.step_ms:
        return "unchanged"
    kern = d_kern * d_step > 0 and abs(d_kern) >= SHARE * abs(d_step)
    rest = d_rest * d_step > 0 and abs(d_rest) >= SHARE * abs(d_step)
    if kern and rest:
        return "kernels and host"
    if kern:
        return "kernels"
    if rest:
        return "host (beside the kernels)"
    return "neither alone"


def short(name: str, limit: int = 70) -> str:
    """A kernel's name for a table: no "void", no anonymous namespaces, template brackets as [],
    cut to `limit` characters (names are matched in full; this is for reading)."""
    name = name.replace("void ", "").replace("(anonymous namespace)::", "").replace("<", "[").replace(">", "]")
    return name[:limit] + ("…" if len(name) > limit else "")


@dataclass(frozen=True)
class Retuned:
    """The kernels whose autotuned launch configuration differs between two runs' cold compiles."""

    compared: int  # kernels both records name
    changed: tuple  # ((kernel, configuration in A, in B), ...), by name

    def as_json(self) -> dict:
        return {"kernels_compared": self.compared,
                "changed": [{"kernel": k, "a": ca, "b": cb} for k, ca, cb in self.changed]}


def retuned(raw_a: str | None, raw_b: str | None) -> Retuned | None:
    """What Inductor's autotuning chose differently in B's cold compile than in A's, kernel by kernel
    (collector.record.contract.autotune_differences: by name). None unless both runs kept a record (older
    rows, eager, the CPU and compiles that timed no candidates have none)."""
    ra, rb = autotune_record(raw_a), autotune_record(raw_b)
    if ra is None or rb is None:
        return None
    return Retuned(len(set(ra["kernels"]) & set(rb["kernels"])), tuple(autotune_differences(ra, rb)))


def process_draws(row: dict) -> list[dict] | None:
    """Each process's autotuned launch configurations, in process order, where every process compiled
    cold in its own cache (COLD_REPLICATES=1): the cold process's record, then each replicate's (the
    cold process's with the replicate's recorded differences). None otherwise, or where the record
    does not cover every timed process (a replicate that failed)."""
    rec = autotune_record(row.get("autotune_json"))
    if row.get("replicate_cache") != "cold" or rec is None or not rec.get("count"):
        return None
    draws = autotune_processes(rec)
    ms = row.get("compiled_process_ms")
    ok = draws is not None and all(d is not None for d in draws) and ms is not None and len(draws) == len(list(ms))
    return draws if ok else None


def draw_spread(row: dict) -> str | None:
    """Where every process compiled cold and the compiled step's processes disagree (beyond
    stats.DISAGREE): whether the slowest and the fastest process drew other launch configurations, in
    words, or None. The same configurations rule the draw out; differing ones make it a candidate (each
    process's own draw, which the interval holds), not a finding: a launch-bound side spreads anyway."""
    draws = process_draws(row)
    if draws is None:
        return None
    ms = [float(x) for x in row["compiled_process_ms"]]
    slow, fast = ms.index(max(ms)), ms.index(min(ms))
    if ms[fast] <= 0 or ms[slow] / ms[fast] - 1 <= DISAGREE:
        return None
    n = len(autotune_differences({"kernels": draws[slow]}, {"kernels": draws[fast]}))
    head = f"compiled p{slow + 1} {_ms(ms[slow])} ms vs p{fast + 1} {_ms(ms[fast])} ms"
    if not n:
        return f"{head}: the same autotuned launch configurations (not the autotuning draw)"
    return f"{head}: {n} of {len(draws[slow])} autotuned launch configurations differ (each compiled its own)"


def config_change(ca: str, cb: str) -> str:
    """'A XBLOCK=512 num_warps=8, B XBLOCK=1024 num_warps=4': the keys that differ."""
    da = dict(x.split("=", 1) for x in ca.split() if "=" in x)
    db = dict(x.split("=", 1) for x in cb.split() if "=" in x)
    keys = [k for k in dict.fromkeys([*da, *db]) if da.get(k) != db.get(k)]
    return ("A " + " ".join(f"{k}={da.get(k, '-')}" for k in keys) + ", B "
            + " ".join(f"{k}={db.get(k, '-')}" for k in keys))


def _kernel_moved(a: Split, b: Split, name: str) -> float:
    """B's time a step of kernel `name` less A's (0 where a profile did not keep the name)."""
    return b.kernels.get(name, (0, 0, 0.0))[2] - a.kernels.get(name, (0, 0, 0.0))[2]


def retuned_carried(r: Retuned, a: Split | None, b: Split | None) -> bool | None:
    """Whether the kernels autotuned otherwise carried the step's change (their time, summed, moved
    the step's way by at least SHARE of it); None where the cell was not profiled in both runs. A
    planted host wait beside re-tuned kernels must not read as the draw (the H200 check: pf-h200-a
    against pf-h200-p10, docs/measurement.md)."""
    if a is None or b is None:
        return None
    moved_ms = sum(_kernel_moved(a, b, k) for k, *_ in r.changed)
    d_step = b.step_ms - a.step_ms
    return moved_ms * d_step > 0 and abs(moved_ms) >= SHARE * abs(d_step)


def most_moved(r: Retuned, a: Split | None, b: Split | None) -> tuple[str, str, str]:
    """The changed kernel whose profiled time moved most between A and B (the first by name where
    the cell was not profiled in both)."""
    if a is None or b is None:
        return r.changed[0]
    return max(r.changed, key=lambda t: abs(_kernel_moved(a, b, t[0])))


def moved(a: Split, b: Split, n: int = TOP_MOVED, changed: tuple = ()) -> str:
    """What moved most, in ms a step: the kinds (beyond 0.5% of A's kernel time), the kernels by name
    that both profiles kept (beyond 1%; with the launch configuration where autotuning chose another in
    B, `changed`: Retuned.changed), and the time of names kept in one run only (a library that picked
    another kernel, Inductor that named its kernels otherwise)."""
    configs = {k: config_change(ca, cb) for k, ca, cb in changed}
    kinds = sorted(set(a.kinds) | set(b.kinds), key=lambda k: -abs(b.kinds.get(k, 0) - a.kinds.get(k, 0)))
    parts = [f"{k} {_ms(a.kinds.get(k, 0))} to {_ms(b.kinds.get(k, 0))}" for k in kinds[:2]
             if abs(b.kinds.get(k, 0) - a.kinds.get(k, 0)) > 0.005 * a.kernel_ms]
    both = sorted(set(a.kernels) & set(b.kernels), key=lambda k: -abs(b.kernels[k][2] - a.kernels[k][2]))
    parts += [f"{short(k)} {_ms(a.kernels[k][2])} to {_ms(b.kernels[k][2])} ({b.kernels[k][1]:g} a step"
              + (f"; autotuned {configs[k]})" if k in configs else ")")
              for k in both[:n] if abs(b.kernels[k][2] - a.kernels[k][2]) > 0.01 * a.kernel_ms]
    if a.host_ops and b.host_ops:  # the host operators that moved most (self CPU time under the profiler)
        ops = sorted(set(a.host_ops) & set(b.host_ops), key=lambda k: -abs(b.host_ops[k][2] - a.host_ops[k][2]))
        parts += [f"host {short(k, 40)} {_ms(a.host_ops[k][2])} to {_ms(b.host_ops[k][2])}" for k in ops[:2]
                  if abs(b.host_ops[k][2] - a.host_ops[k][2]) > 0.02 * a.host_ms]
    only_a = sum(v[2] for k, v in a.kernels.items() if k not in b.kernels)
    only_b = sum(v[2] for k, v in b.kernels.items() if k not in a.kernels)
    if only_a or only_b:
        parts.append(f"names in one run only {_ms(only_a)} to {_ms(only_b)}")
    return "; ".join(parts) or "-"


@dataclass(frozen=True)
class PairRow:
    """One side of one cell profiled in both runs: both splits, where a called change was, what moved."""

    cell_id: str
    label: str
    side: str
    a: Split
    b: Split
    where: str
    moved: str
    retuned: Retuned | None = None  # compiled side: autotuning's choices A against B (both runs' records)

    @property
    def step(self) -> str:  # A -> B, ms (the tables)
        return f"{_ms(self.a.step_ms)} -> {_ms(self.b.step_ms)}"

    @property
    def kernels(self) -> str:
        return f"{_ms(self.a.kernel_ms)} -> {_ms(self.b.kernel_ms)}"

    @property
    def rest(self) -> str:
        return f"{_ms(self.a.rest_ms)} -> {_ms(self.b.rest_ms)}"

    def as_json(self) -> dict:
        """estimates.json's `step_split` entry: numbers in ms a step, A then B."""
        kinds = sorted(set(self.a.kinds) | set(self.b.kinds))
        return {"cell_id": self.cell_id, "cell": self.label, "side": self.side, "device": self.a.device,
                "step_ms": [self.a.step_ms, self.b.step_ms], "kernel_ms": [self.a.kernel_ms, self.b.kernel_ms],
                "rest_ms": [self.a.rest_ms, self.b.rest_ms], "where": self.where,
                "kinds_ms": {k: [self.a.kinds.get(k, 0.0), self.b.kinds.get(k, 0.0)] for k in kinds},
                **({"host_ms": [self.a.host_ms, self.b.host_ms]}
                   if self.a.host_ms is not None and self.b.host_ms is not None else {}),
                **({"autotune": self.retuned.as_json()} if self.retuned is not None else {})}


def pair_rows(pairs: list[dict], label, called) -> list[PairRow]:
    """The comparison's table from its paired cells (compare_pairs.sql: both sides' medians and
    profiles) profiled in both runs: per side, step, kernels and the rest in A and B, what moved, and
    where the change was when the comparison called a change the side's step time is part of
    (called(side, cell_id): its own step time, or the cell's speedup; else "not called": a move
    within the noise is no one's to carry)."""
    out = []
    for p in pairs:
        sa = splits(p["profile_a"], {"eager": p["eager_a"], "compiled": p["compiled_a"]})
        sb = splits(p["profile_b"], {"eager": p["eager_b"], "compiled": p["compiled_b"]})
        tune = retuned(p.get("autotune_a"), p.get("autotune_b"))
        for side in SIDES:
            if side in sa and side in sb:
                a, b = sa[side], sb[side]
                r = tune if side == "compiled" else None
                out.append(PairRow(p["cell_id"], label(p), side, a, b,
                                   where(a, b) if called(side, p["cell_id"]) else "not called",
                                   moved(a, b, changed=r.changed if r else ()), r))
    return out
