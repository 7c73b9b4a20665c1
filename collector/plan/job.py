"""The typed job that crosses the process boundary: what one cell process is asked to do.

A cell is measured by up to four kinds of process, all on the cell's own cache directory:
- `cold`: the first process, with empty compile caches: compile time, correctness, memory,
  energy, diagnostics, and one replicate of the timed blocks;
- `replicate`: a later fresh process on the now warm cache: its warm first call and another
  replicate of the timed blocks, with the cold process's block layout (so every process's
  samples have one shape); nothing that only the first process needs;
- `warm`: the warm-cache first call alone (when the protocol asks for one process per cell);
- `portable`: an empty cache plus the saved portable artifacts: that first call alone.

The job is written to JSON by the parent and read back by the child as typed records (the
matrix's Cell and Protocol); unknown fields, of the job or of its cell or protocol, are refused
rather than dropped (a newer parent with an older child must not half-work).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from collector.plan.matrix import Cell, Protocol

KINDS = ("cold", "replicate", "warm", "portable")


class JobError(ValueError):
    """A job file the cell process cannot run: the message names the field."""


@dataclass(frozen=True)
class Layout:
    """How the timed blocks are cut: samples per block and steps per sample (from the cold process)."""

    steps_per_block: int
    steps_per_sample: int
    planted_delay_ms: float | None = None  # a planted slowdown: every process adds the same time


@dataclass(frozen=True)
class Job:
    kind: str
    cell: Cell
    protocol: Protocol
    device: str
    replicate: int = 0  # 0: the cold process; 1..: the warm replicates, in order
    layout: Layout | None = None  # replicate: the cold process's layout
    portable_path: str | None = None  # cold: save the portable cache artifacts there
    portable_from: str | None = None  # portable: load them from there

    def __post_init__(self):
        if self.kind not in KINDS:
            raise JobError(f"unknown job kind {self.kind!r}; valid: {', '.join(KINDS)}")
        if self.kind == "replicate" and self.layout is None:
            raise JobError("a replicate job needs the cold process's layout")
        if self.kind == "portable" and not self.portable_from:
            raise JobError("a portable job needs portable_from")

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Job":
        if not isinstance(data, dict):
            raise JobError(f"a job is a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise JobError(f"unknown job field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        data = dict(data)
        try:
            if data.get("layout") is not None:
                data["layout"] = Layout(**data["layout"])
            if isinstance(data.get("cell"), dict):
                data["cell"] = Cell(**data["cell"])
            if isinstance(data.get("protocol"), dict):
                data["protocol"] = Protocol(**data["protocol"])
            return cls(**data)
        except TypeError as exc:
            raise JobError(f"job: {exc}") from None
