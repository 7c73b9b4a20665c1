"""When two runs' manifests go together: the one rule behind every refusal to mix runs.

Two purposes, one rule:
- JOIN: rows of two manifests become one run (a resumed run, a merged shard, a SLURM node writing into
  the run). The machine, the software (torch, the torch.compile settings in the environment) and every
  setting that changes what is measured (collector.record.settings, `must_match`) must be the same.
- COMPARE: two runs set side by side (a comparison, the gate). The machine, the matrix preset and the
  same settings must be the same; the software may differ, since two builds side by side is what a
  comparison is for (the report names them).

A setting that does not change what is measured (the timeout, the extra warm-cache or portable-cache
process, the recompile sweep, the kernel profile after timing) never stops either. A field recorded only
since a later date (RECORDED_LATER) is not compared where the earlier manifest lacks it. Both manifests
are read as the current code reads them (contract.upgrade_manifest). No torch.
"""
from __future__ import annotations

from dataclasses import dataclass

from collector.record.contract import upgrade_manifest
from collector.record.settings import MUST_MATCH

JOIN, COMPARE = "join", "compare"
MACHINE = ("device", "device_name")  # what every purpose needs the same
SOFTWARE = ("torch_version", "compile_env")  # what a join also needs the same
RECORDED_LATER = ("compile_env",)  # environment fields that runs made before 2026-12-02 lack
LABELS = {"device_name": "GPU or CPU"}  # how a comparison names a field


@dataclass(frozen=True)
class Difference:
    """One field that stops two manifests going together: where it is (environment, protocol, preset),
    its name and the two values (the first manifest's, then the other's)."""

    part: str
    key: str
    first: object
    other: object

    def words(self, sep: str = " vs ") -> str:
        label = LABELS.get(self.key, self.key) if self.part == "environment" else \
            "matrix preset" if self.part == "preset" else f"protocol {self.key}"
        return f"{label}: {self.first!r}{sep}{self.other!r}"


def environment_keys(purpose: str) -> tuple[str, ...]:
    if purpose not in (JOIN, COMPARE):
        raise ValueError(f"purpose {purpose!r}: one of {JOIN!r}, {COMPARE!r}")
    return MACHINE + SOFTWARE if purpose == JOIN else MACHINE


def environment_differences(first: dict, other: dict, purpose: str = JOIN) -> list[Difference]:
    """The environment fields (run.json's `environment`) that differ, for `purpose`."""
    first, other = first or {}, other or {}
    return [Difference("environment", k, first.get(k), other.get(k)) for k in environment_keys(purpose)
            if (k in first or k not in RECORDED_LATER) and first.get(k) != other.get(k)]


def differences(first: dict, other: dict, purpose: str) -> list[Difference]:
    """Every field that stops manifest `other` going with `first` (both run.json objects, or the parts
    of one: `environment`, `protocol`, `preset`) for `purpose`: JOIN or COMPARE. Empty: they go together."""
    first, other = upgrade_manifest(first or {}), upgrade_manifest(other or {})
    out = environment_differences(first.get("environment"), other.get("environment"), purpose)
    if purpose == COMPARE and first.get("preset") != other.get("preset"):
        out.append(Difference("preset", "preset", first.get("preset"), other.get("preset")))
    pa, pb = first.get("protocol") or {}, other.get("protocol") or {}
    out += [Difference("protocol", k, pa.get(k), pb.get(k)) for k in sorted(MUST_MATCH) if pa.get(k) != pb.get(k)]
    return out
