"""The compiled program, compared: what Dynamo captured, what Inductor generated and how the host
issued it, per paired cell and per suite, so that a step-time change between two runs says where it
came from.

Per paired cell (both runs ok and compiled), from the rows' records:
- the captured graph (graph_ops_json, schema v11): the same ops or not, and which ops one run's graph
  has more of ("removed" in B, "added" in B), by name;
- Inductor's kernel count (kernel_count) and, from the kernel profile (PROFILE=1), the kernels a step
  launches and the kernel families that are gone or new in B (names less what a recompile renumbers,
  collector.record.contract.kernel_family), largest first;
- the compiled step split into the kernels' device time a step (the profile) and the host's enqueue
  time a step (the median over blocks of each block's first sample, issued into an empty queue: later
  samples of a GPU-bound step wait for the queue), and the host time per launched kernel: enqueue
  time over launches;
- which of these moved with the step ("carried" it: moved the step's way by at least SHARE of it).

A changed captured graph while the model packages and the inputs are the same is worded as the
model's code taking another path under B: torch did not generate other code for the same program,
it was handed another program (transformers builds an attention mask inside the graph under torch <
2.14, docs/findings-suites.md), unless Dynamo's graph breaks differ too: then torch traced the code
otherwise (its capture: T5's copy.deepcopy() of its config breaks the graph under 2.11, not under
2.14.1). Like the kernel split, this attributes; it calls nothing: the
estimates call (analysis/stats/pair_estimates.py).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from analysis.explain.kernels import SHARE, STEADY, short
from analysis.explain.why import _json
from collector.record.contract import package_differences, suite_of

TOP_OPS = 6
TOP_FAMILIES = 4


@dataclass(frozen=True)
class Side:
    """One run's compiled program of one cell: what the records hold (None: not recorded)."""

    step_ms: float | None
    enqueue_ms: float | None  # host time to issue one step into an empty queue (each block's first sample)
    device_ms: float | None  # the kernels' device time a step (kernel profile)
    launches: float | None  # kernels a step (kernel profile, schema v11)
    kernels: int | None  # Inductor's generated kernels (the compile)
    families: dict | None  # {family: [calls, us] a step}
    ops: dict | None  # the captured graph's {op: count}
    graphs: int | None
    packages: dict | None
    inputs: dict | None
    breaks: int | None = None  # Dynamo's graph breaks
    break_reasons: dict | None = None  # {reason: count}

    @property
    def host_us_per_launch(self) -> float | None:
        if self.enqueue_ms is None or not self.launches:
            return None
        return 1e3 * self.enqueue_ms / self.launches


def side_of(p: dict, s: str) -> Side:
    """Side `s` ('a' or 'b') of a compare_pairs row."""
    prof = (_json(p.get(f"profile_{s}")) or {}).get("compiled") or {}
    ops = _json(p.get(f"graph_ops_{s}"))
    device = prof.get("us_per_step")
    return Side(p.get(f"compiled_{s}"), p.get(f"compiled_enq_{s}"), None if device is None else device / 1e3,
                prof.get("launches"), p.get(f"kernels_{s}"), prof.get("families"),
                None if ops is None else ops.get("ops"), None if ops is None else ops.get("graphs"),
                _json(p.get(f"packages_{s}")), _json(p.get(f"inputs_{s}")), p.get(f"breaks_{s}"),
                _json(p.get(f"break_reasons_{s}")))


def op_changes(a: dict, b: dict) -> tuple[dict, dict]:
    """({op: how many fewer in B}, {op: how many more in B}) between two graphs' op counts."""
    removed = {k: a[k] - b.get(k, 0) for k in a if a[k] > b.get(k, 0)}
    added = {k: b[k] - a.get(k, 0) for k in b if b[k] > a.get(k, 0)}
    return removed, added


def _ops_text(ops: dict) -> str:
    top = sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{k} x{n}" for k, n in top[:TOP_OPS])
    return text + (f" and {len(top) - TOP_OPS} more" if len(top) > TOP_OPS else "")


def family_changes(a: dict, b: dict) -> tuple[list[str], list[str]]:
    """(families in A only, in B only), largest device time first ("(others)" left out)."""
    gone = sorted((k for k in a if k not in b and k != "(others)"), key=lambda k: -a[k][1])
    new = sorted((k for k in b if k not in a and k != "(others)"), key=lambda k: -b[k][1])
    return gone, new


def _names(names: list[str]) -> str:
    return ", ".join(short(n, 60) for n in names[:TOP_FAMILIES]) + (f" and {len(names) - TOP_FAMILIES} more" if len(names) > TOP_FAMILIES else "")


def _pair(x, y, fmt) -> str:
    return "-" if x is None or y is None else f"{fmt(x)} → {fmt(y)}"


def carried(a: Side, b: Side) -> list[str]:
    """What moved with the compiled step from A to B, in words: the kernels' device time, the host's
    enqueue time (and in it the launch count and the host time per launch); empty where the step did
    not move (below the minimum effect) or nothing alone carried it."""
    if a.step_ms is None or b.step_ms is None or abs(b.step_ms - a.step_ms) < STEADY * a.step_ms:
        return []
    d = b.step_ms - a.step_ms

    def moved(x, y):
        return x is not None and y is not None and (y - x) * d > 0 and abs(y - x) >= SHARE * abs(d)

    out = []
    if moved(a.device_ms, b.device_ms):
        out.append("device time (the kernels)")
    if moved(a.enqueue_ms, b.enqueue_ms):
        parts = []
        if a.launches and b.launches and (b.launches - a.launches) * d > 0 and \
                abs(b.launches / a.launches - 1) >= STEADY:
            parts.append("launches")
        ha, hb = a.host_us_per_launch, b.host_us_per_launch
        if ha and hb and (hb - ha) * d > 0 and abs(hb / ha - 1) >= STEADY:
            parts.append("host time per launch")
        out.append("host time" + (f" ({' and '.join(parts)})" if parts else ""))
    return out


@dataclass(frozen=True)
class ProgramRow:
    """One paired cell's compiled program, A → B, formatted for the comparison's table."""

    cell_id: str
    label: str
    suite: str
    step: str  # compiled step, ms
    device: str  # the kernels' device time a step, ms
    host: str  # host enqueue time a step, ms
    launches: str  # kernels a step
    host_per_launch: str  # us
    kernels: str  # Inductor's kernel count
    graph: str  # "same (327 ops)", "327 → 318 ops", "not recorded"
    ops: str  # the ops that differ, by name
    families: str  # kernel families gone / new in B
    moved: str  # what carried the step change
    reading: str  # the sentence
    graph_differs: bool | None  # None: not recorded in both
    numbers: dict
    phase: str = ""  # infer / train: a suite's phases are summed apart
    graph_class: str = "not_recorded"  # what the captured graph did: a key of GRAPH_CLASSES
    breaks: str = ""  # "graph breaks 5 → 0: copy.deepcopy()" where they differ

    def as_json(self) -> dict:
        return {"cell_id": self.cell_id, "cell": self.label, "suite": self.suite, **self.numbers}


def graph_class(a: Side, b: Side, differs: bool | None) -> str:
    """What the captured graph did from A to B, as a key of GRAPH_CLASSES. A graph that differs while the
    model packages and the inputs are recorded alike: Dynamo's capture where its graph breaks differ (torch
    traced the code otherwise: T5's copy.deepcopy() of its config breaks under 2.11, not under 2.14.1; the
    model's path may have changed in the same cells too), else the model's code on another path
    (transformers' mask built inside the graph under torch < 2.14)."""
    if differs is None:
        return "not_recorded"
    if not differs:
        return "same_graph"
    alike = (a.packages is not None and b.packages is not None and not package_differences(a.packages, b.packages)
             and a.inputs is not None and a.inputs == b.inputs)
    if not alike:
        return "differs_with_packages_or_inputs"
    return "capture" if a.breaks is not None and b.breaks is not None and a.breaks != b.breaks else "other_path"


def _breaks_text(a: Side, b: Side) -> str:
    """"graph breaks 5 → 0: copy.deepcopy() ...": the counts, and the commonest reason of the side with more."""
    more = a if (a.breaks or 0) >= (b.breaks or 0) else b
    top = max((more.break_reasons or {}).items(), key=lambda kv: kv[1], default=None)
    return f"graph breaks {a.breaks} → {b.breaks}" + (f": {short(top[0].split(' Explanation:')[0], 60)}" if top else "")


def _reading(a: Side, b: Side, differs: bool | None, removed: dict, added: dict, moved: list[str]) -> str:
    if differs:
        what = "; ".join(filter(None, [f"B's graph lacks {_ops_text(removed)}" if removed else "",
                                       f"has more {_ops_text(added)}" if added else ""]))
        pkgs = package_differences(a.packages, b.packages)
        if pkgs:  # a model library, not torch's own stack (contract.TORCH_STACK)
            return (f"the captured graph differs ({what}), and so do the model packages ("
                    + ", ".join(f"{k} {x or 'none'} → {y or 'none'}" for k, x, y in pkgs)
                    + "): either can have changed it")
        kind = graph_class(a, b, differs)
        if kind == "differs_with_packages_or_inputs":
            return f"the captured graph differs ({what}); the model packages or inputs were not recorded alike"
        if kind == "capture":
            return (f"Dynamo broke the graph otherwise under B ({_breaks_text(a, b)}; {what}): torch's capture "
                    "changed, and the ops that differ may be the model's path as well")
        return f"the model's code took another path under B ({what}): not a code-generation change"
    if differs is False:
        head = "same captured graph"
    else:
        head = "captured graph not recorded"
    if not moved:
        return head + ("; the compiled step did not move beyond the minimum effect" if a.step_ms and b.step_ms else "")
    return f"{head}; the step moved with {' and '.join(moved)}"


def pair_row(p: dict, label: str) -> ProgramRow | None:
    """The row of one compare_pairs row (None unless both runs have an ok compiled side)."""
    if p.get("status_a") != "ok" or p.get("status_b") != "ok" or p.get("compiled_a") is None \
            or p.get("compiled_b") is None:
        return None
    a, b = side_of(p, "a"), side_of(p, "b")
    if a.ops is not None and b.ops is not None:
        removed, added = op_changes(a.ops, b.ops)
        differs = bool(removed or added) or a.graphs != b.graphs
        na, nb = sum(a.ops.values()), sum(b.ops.values())
        graph = f"same ({na} ops)" if not differs else f"{na} → {nb} ops" + (
            f", {a.graphs} → {b.graphs} graphs" if a.graphs != b.graphs else "")
        ops = "; ".join(filter(None, [f"fewer in B: {_ops_text(removed)}" if removed else "",
                                      f"more in B: {_ops_text(added)}" if added else ""])) or "-"
    else:
        removed, added, differs, graph, ops = {}, {}, None, "not recorded", "-"
    fams = "-"
    if a.families is not None and b.families is not None:
        gone, new = family_changes(a.families, b.families)
        fams = "; ".join(filter(None, [f"gone: {_names(gone)}" if gone else "", f"new: {_names(new)}" if new else ""])) \
            or "the same families"
    moved = carried(a, b)
    ms = lambda v: f"{v:.3f}" if v < 10 else f"{v:.2f}"  # noqa: E731
    numbers = {"step_ms": [a.step_ms, b.step_ms], "device_ms": [a.device_ms, b.device_ms],
               "enqueue_ms": [a.enqueue_ms, b.enqueue_ms], "launches": [a.launches, b.launches],
               "host_us_per_launch": [a.host_us_per_launch, b.host_us_per_launch], "kernels": [a.kernels, b.kernels],
               "graph_differs": differs, "graph_class": graph_class(a, b, differs), "ops_fewer_in_b": removed, "ops_more_in_b": added, "carried_by": moved,
               "package_differences": [list(x) for x in package_differences(a.packages, b.packages, torch_stack=True)]}
    return ProgramRow(
        p["cell_id"], label, suite_of(p.get("model") or ""), _pair(a.step_ms, b.step_ms, ms),
        _pair(a.device_ms, b.device_ms, ms), _pair(a.enqueue_ms, b.enqueue_ms, ms),
        _pair(a.launches, b.launches, lambda v: f"{v:g}"), _pair(a.host_us_per_launch, b.host_us_per_launch,
                                                                  lambda v: f"{v:.1f}"),
        _pair(a.kernels, b.kernels, str), graph, ops, fams, ", ".join(moved) or "-",
        _reading(a, b, differs, removed, added, moved), differs, numbers, p.get("phase") or "",
        numbers["graph_class"], _breaks_text(a, b) if None not in (a.breaks, b.breaks) and a.breaks != b.breaks else "")


def pair_rows(pairs: list[dict], label) -> list[ProgramRow]:
    """Every paired cell whose compiled side ran in both runs and has something recorded beyond the
    step (a captured graph, a kernel profile or a kernel count)."""
    rows = [pair_row(p, label(p)) for p in pairs]
    return [r for r in rows if r is not None and (r.graph_differs is not None or r.launches != "-" or r.kernels != "-")]


@dataclass(frozen=True)
class ProgramSuite:
    """Per suite and phase: how many cells' captured graphs differ, how the kernels and the host moved, and
    the compiled step's geometric mean change split by what the graph did: the part of a suite's move
    that is the model's code on another path, apart from the part with the same graph."""

    suite: str  # "huggingface infer"
    cells: int
    graph: str  # "differs in 4 of 5 (the model's code took another path in 4)"
    kernels: str  # "fewer in 4, more in 0 of 5"
    host_per_launch: str  # "median 24.0 → 15.2 us"
    carried: str  # "device time in 3, host time in 1 of 4 cells whose step moved"
    split: dict | None = None  # {"other_path": (geomean change, cells), ...}: step_by_graph

    @property
    def step_by_graph(self) -> str:
        """The split in words: "-34.1% in 5 (the model's code on another path); -1.1% in 2 (the same graph)"."""
        return "; ".join(f"{x:+.1%} in {n} ({GRAPH_CLASSES[key]})" for key, (x, n) in (self.split or {}).items()) \
            or "not recorded"

    def as_json(self) -> dict:
        return {"suite": self.suite, "cells": self.cells,
                "compiled_step_by_graph": {k: [round(x, 5), n] for k, (x, n) in (self.split or {}).items()}}


GRAPH_CLASSES = {"other_path": "the model's code on another path",
                 "capture": "other graph breaks: torch's capture, perhaps the model's path too", "same_graph": "the same graph",
                 "differs_with_packages_or_inputs": "a graph that differs with the packages or inputs",
                 "not_recorded": "no graph recorded"}  # ProgramRow.graph_class, in the order a suite lists them


def step_change(rows: list[ProgramRow]) -> tuple[float, int] | None:
    """The compiled step's geometric mean change B/A over the rows with a step in both, and their count."""
    ratios = [b / a for r in rows for a, b in [r.numbers["step_ms"]] if a and b]
    return (math.exp(sum(map(math.log, ratios)) / len(ratios)) - 1, len(ratios)) if ratios else None


def step_by_graph(group: list[ProgramRow]) -> dict[str, tuple[float, int]]:
    """The compiled step's geometric mean change B/A (and the cells) over each class of what the captured
    graph did: where a suite moved because the model's code took another path, and where with the same graph."""
    got = {key: step_change([r for r in group if r.graph_class == key]) for key in GRAPH_CLASSES}
    return {key: x for key, x in got.items() if x}


def suite_rows(rows: list[ProgramRow]) -> list[ProgramSuite]:
    out = []
    for suite, phase in sorted({(r.suite, r.phase) for r in rows}):
        group = [r for r in rows if (r.suite, r.phase) == (suite, phase)]
        rec = [r for r in group if r.graph_differs is not None]
        diff = [r for r in rec if r.graph_differs]
        why = "; ".join(f"{what} in {n}" for what, n in (
            ("the model's code took another path", sum(r.graph_class == "other_path" for r in diff)),
            ("Dynamo's graph breaks changed", sum(r.graph_class == "capture" for r in diff))) if n)
        graph = (f"differs in {len(diff)} of {len(rec)}" + (f" ({why})" if why else "")) if rec else "not recorded"
        ks = [r.numbers["kernels"] for r in group if None not in r.numbers["kernels"]]
        kernels = (f"fewer in {sum(b < a for a, b in ks)}, more in {sum(b > a for a, b in ks)} of {len(ks)}"
                   if ks else "not recorded")
        hp = [r.numbers["host_us_per_launch"] for r in group if None not in r.numbers["host_us_per_launch"]]
        host = (f"median {statistics.median(a for a, _ in hp):.1f} → {statistics.median(b for _, b in hp):.1f} us "
                f"({len(hp)} cells)" if hp else "not recorded")
        stepped = [r for r in group if None not in r.numbers["step_ms"]
                   and abs(r.numbers["step_ms"][1] - r.numbers["step_ms"][0]) >= STEADY * r.numbers["step_ms"][0]]
        dev = sum(any(m.startswith("device") for m in r.numbers["carried_by"]) for r in stepped)
        hst = sum(any(m.startswith("host") for m in r.numbers["carried_by"]) for r in stepped)
        carried_text = (f"device time in {dev}, host time in {hst} of {len(stepped)} cells whose compiled step moved"
                        if stepped else "no compiled step moved beyond the minimum effect")
        out.append(ProgramSuite(f"{suite} {phase}".strip(), len(group), graph, kernels, host, carried_text,
                                step_by_graph(group)))
    return out


def verdict_line(rows: list[ProgramRow]) -> str | None:
    """The verdict's line on the compiled program (the first screen): in how many paired cells the
    captured graph differs, how many of those are the model's code taking another path, and where
    Inductor's kernel count moved; None where no cell has a captured graph in both runs."""
    rec = [r for r in rows if r.graph_differs is not None]
    if not rec:
        return None
    diff = [r for r in rec if r.graph_differs]
    path = [r for r in diff if r.graph_class == "other_path"]
    capture = [r for r in diff if r.graph_class == "capture"]
    ks = [r.numbers["kernels"] for r in rec if None not in r.numbers["kernels"]]
    text = f"Compiled program: the captured graph differs in {len(diff)} of {len(rec)} cells"
    said = []
    if path:
        said.append(f"{len(path)} with the same model packages and inputs: the model's code took another path "
                    f"under B, e.g. {path[0].label}: {_ops_text(path[0].numbers['ops_fewer_in_b']) or 'ops added'}"
                    + (" fewer" if path[0].numbers["ops_fewer_in_b"] else ""))
    if capture:
        said.append(f"{len(capture)} where Dynamo's graph breaks changed (torch's capture; the model's path may differ too), e.g. "
                    f"{capture[0].label}: "
                    + capture[0].breaks)
    text += f" ({'; '.join(said)})" if said else ""
    same = step_change([r for r in rec if r.graph_differs is False])
    moved = [f"{x[0]:+.1%} in the {x[1]} {what}" for x, what in ((step_change(path), "on another path"),
                                                                (step_change(capture), "with other graph breaks")) if x]
    if moved and same:  # why the step moved: the other path and the capture against the same graph
        text += (f"; the compiled step moved (geomean) {', '.join(moved)} and {same[0]:+.1%} in the {same[1]} with "
                 "the same graph")
    if ks:
        text += (f"; Inductor's kernels fewer in {sum(b < a for a, b in ks)}, more in {sum(b > a for a, b in ks)} "
                 f"of {len(ks)}")
    return text + " (What the compiled program did)."
