"""Repeats: is a change called in one pair of runs called again in the other pairs?

A comparison's intervals hold the noise within its pair of runs (processes, order, drift on one
machine, interleaved). They do not hold what differs between machines of one kind, and a machine's
offsets can differ between two torch versions: the MoE's reduce-overhead compiled step under torch
2.11 read 0.921, 0.946 and 0.961 ms on three H200s, and 2.14.1 against 2.11 was called +3.3%, then
not called (+0.6%), then -5.0% (docs/findings-versions.md). So the comparison takes further pairs of
runs of the same two versions, each measured in its own run set (`--repeat A2:B2`, make REPEATS=),
estimates every pair the same way (analysis/stats/pair_estimates.py, one call rule) and says of every change
called in any pair whether it

- repeats: called the same way in every pair;
- repeats where paired: called the same way in every pair that has the cell, two or more, while
  another pair lacks it (weaker: fewer pairs behind it);
- is not repeated: called in some pairs, not called in the others;
- is called both ways: improved in one pair and regressed in another.

Only a change that repeats is a release claim; the others are quoted with the pair they came from.
"""
from __future__ import annotations

from dataclasses import dataclass

from analysis.compare_report import changes
from analysis.stats import estimates as est
from analysis.data.load import DataError, Run
from analysis.stats.pair_estimates import PairEstimates

REPEATS, WHERE_PAIRED, NOT_REPEATED, BOTH_WAYS = ("repeats", "repeats where paired", "not repeated",
                                                  "called both ways")
ORDER = (REPEATS, WHERE_PAIRED, NOT_REPEATED, BOTH_WAYS)


@dataclass(frozen=True)
class RepeatPair:
    """One pair of runs of the comparison: its ids and how it was measured."""

    baseline: str
    candidate: str
    how: str  # changes.how_measured: one machine interleaved, in turn, or two machines


@dataclass(frozen=True)
class RepeatRow:
    """One called change of one quantity of one cell, across every pair."""

    cell_id: str
    label: str
    quantity: str  # a key of estimates.QUANTITIES
    what: str  # its name ("compiled step time")
    points: tuple  # per pair: the ratio B/A, or None where the cell is not paired
    calls: tuple  # per pair: the call, or "not paired"
    outcome: str  # REPEATS / NOT_REPEATED / BOTH_WAYS
    css: str  # faster / slower / unclear

    @property
    def changes(self) -> tuple:
        """Per pair: '-4.3% improved', '+0.6% below minimum effect', 'not paired'."""
        return tuple(c if p is None else f"{est.pct(p)} {c}" for p, c in zip(self.points, self.calls))


def parse(spec: str) -> tuple[str, str]:
    """'A2:B2' -> ('A2', 'B2'); a DataError naming the form otherwise."""
    a, sep, b = spec.partition(":")
    if not sep or not a or not b or ":" in b:
        raise DataError(f"--repeat takes BASELINE:CANDIDATE (two run ids joined by a colon), got {spec!r}")
    return a, b


def check(main: tuple[Run, Run], others: list[tuple[Run, Run]]) -> list[str]:
    """Why a pair is not a repeat of the main comparison: other torch versions, another device."""
    out = []
    want = changes.versions(*main), changes.device_words(*main)
    for a, b in others:
        got = changes.versions(a, b), changes.device_words(a, b)
        if got != want:
            out.append(f"{a.run_id}:{b.run_id} is torch {got[0][1]} against {got[0][0]} on {got[1]}, the comparison "
                       f"torch {want[0][1]} against {want[0][0]} on {want[1]}")
    return out


def shared_machines(pairs: list[tuple[Run, Run]]) -> list[str]:
    """The pairs (as 'A:B') that share a machine boot with an earlier pair: they repeat on one
    machine, not across machines."""
    seen: set = set()
    out = []
    for a, b in pairs:
        boots = changes.boots(a) | changes.boots(b)
        if boots & seen:
            out.append(f"{a.run_id}:{b.run_id}")
        seen |= boots
    return out


def rows(pes: list[PairEstimates]) -> list[RepeatRow]:
    """Every change called in any pair, with its change and call in every pair; those that repeat
    first, then those called in some pairs only, then those called both ways."""
    labels: dict[str, str] = {}
    for pe in pes:
        labels.update(pe.labels)
    out = []
    for q in est.QUANTITIES:
        called = sorted({cid for pe in pes for cid, e in pe.ests[q].items() if e.called})
        for cid in called:
            es = [pe.ests[q].get(cid) for pe in pes]
            paired = [e for e in es if e is not None]
            directions = {e.call for e in paired if e.called}
            if len(directions) > 1:
                outcome = BOTH_WAYS
            elif not all(e.called for e in paired):
                outcome = NOT_REPEATED
            elif len(paired) == len(es):
                outcome = REPEATS
            else:
                outcome = WHERE_PAIRED if len(paired) >= 2 else NOT_REPEATED
            css = ({est.IMPROVED: "faster", est.REGRESSED: "slower"}[next(iter(directions))]
                   if outcome in (REPEATS, WHERE_PAIRED) else "unclear")
            out.append(RepeatRow(cid, labels[cid], q, est.QUANTITIES[q][0],
                                 tuple(None if e is None else e.point for e in es),
                                 tuple("not paired" if e is None else e.call for e in es), outcome, css))
    order = list(est.QUANTITIES)
    return sorted(out, key=lambda r: (ORDER.index(r.outcome), order.index(r.quantity), r.label))


def verdict_line(found: list[RepeatRow], n_pairs: int) -> str:
    """One line for the verdict box: what repeats in every pair, what does not."""
    rep = [r for r in found if r.outcome == REPEATS]
    head = f"Across {n_pairs} pairs of runs (this one and {n_pairs - 1} repeat(s)): "
    if not found:
        return head + "no change called in any pair."
    named = "; ".join(f"{r.what} {r.label} {' / '.join(est.pct(p) for p in r.points)}"
                      for r in rep[:changes.MAX_NAMED])
    more = f" and {len(rep) - changes.MAX_NAMED} more" if len(rep) > changes.MAX_NAMED else ""
    parts = [f"repeated in every pair: {len(rep)}" + (f" ({named}{more})" if rep else "")]
    for outcome, words in ((WHERE_PAIRED, "in every pair that has the cell"),
                           (NOT_REPEATED, "called in some pairs only"), (BOTH_WAYS, "called both ways")):
        n = sum(r.outcome == outcome for r in found)
        if n:
            parts.append(f"{words}: {n}")
    return head + "; ".join(parts) + ". Quote only what repeats."


def as_json(found: list[RepeatRow]) -> list[dict]:
    """estimates.json's `repeats`: per called change, its ratio and call in every pair."""
    return [{"cell_id": r.cell_id, "cell": r.label, "quantity": r.quantity, "outcome": r.outcome,
             "ratios": list(r.points), "calls": list(r.calls)} for r in found]
