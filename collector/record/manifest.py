"""run.json, a run's manifest: its JSON Schema (SCHEMA, written out as collector/record/run.schema.json),
the one reader and validity rule that the collector (resuming a run), the merge and the report share, and
RunManifest, its typed record.

One rule, two consequences: a manifest is read only if it is a regular file holding a JSON object, and
it is valid when it meets SCHEMA. The collector and the merge refuse an unreadable or invalid manifest by
name (exit 2; the cell files beside it are kept); the report reads the run all the same, leaves out the
fields that break the schema and names each on that run's report, never on another's. Old manifests are
read through one upgrade path (contract.upgrade_manifest: a protocol key added later gets the value runs
had before it). No torch.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from collector.record.contract import upgrade_manifest
from collector.record.jsonschema import errors
from collector.record.schema import file_kind
from collector.record.settings import SETTINGS, Protocol

SCHEMA_FILE = Path(__file__).with_name("run.schema.json")
_STRINGS = {"type": "array", "items": {"type": "string"}}
_SESSION = {  # what a session records; a session may hold more (the SLURM executor's, a merge's shard)
    "type": "object",
    "properties": {"started_at": {"type": "string"}, "finished_at": {"type": "string"},
                   "hostname": {"type": ["string", "null"]}, "boot_id": {"type": ["string", "null"]},
                   "preset": {"type": "string"}, "project_git_sha": {"type": ["string", "null"]},
                   "collector_source_sha1": {"type": "string"}, "cells_in_matrix": {"type": "integer", "minimum": 0},
                   "cells_measured": {"type": "integer", "minimum": 0}, "interleaved_with": _STRINGS,
                   "launchers": {"type": "array"}, "workers": {"type": "array"}, "note": {"type": "string"},
                   "host_crowding": {"type": "number", "minimum": 1}},
}


def _protocol_schema() -> dict:
    kinds = {int: "integer", bool: "boolean"}
    props = {}
    for s in SETTINGS:
        prop = {"type": kinds[s.kind], "description": s.help or s.name}
        if s.kind is int and s.lo is not None:
            prop["minimum"] = s.lo
        props[s.name] = prop
    return {"type": "object", "properties": props, "additionalProperties": False}


def schema() -> dict:
    """run.json's JSON Schema, the protocol's part from the settings table."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "run.json: a run's manifest (collector/record/manifest.py)",
        "type": "object",
        "required": ["environment", "protocol", "sessions"],
        "properties": {
            "run_id": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"},
            "schema_version": {"type": "integer", "minimum": 1},
            "environment": {"type": "object", "properties": {"device": {"type": "string"},
                                                             "torch_version": {"type": "string"}}},
            "protocol": _protocol_schema(),
            "preset": {"type": "string"}, "description": {"type": "string"},
            "sessions": {"type": "array", "items": _SESSION},
            "matrices": _STRINGS, "interleaved_with": _STRINGS, "merged_from": _STRINGS, "mixed": _STRINGS,
        },
        "additionalProperties": False,
    }


SCHEMA = schema()


def problems(data) -> list[str]:
    """Every way `data` (run.json as JSON) breaks SCHEMA, each naming its path ('$.protocol.blocks: ...')."""
    return errors(data, SCHEMA)


class Unreadable(ValueError):
    """run.json cannot be read as a JSON object at all; the message says why (without the path)."""


def read(path: Path) -> tuple[dict, list[str]]:
    """(run.json upgraded, the ways it breaks SCHEMA); Unreadable when it is not a regular file, not
    UTF-8 JSON or not an object. The one reader of the collector, the merge and the report."""
    kind = file_kind(path)
    if kind != "a regular file":
        raise Unreadable(f"is not a regular file ({kind})")
    try:
        data = json.loads(Path(path).read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise Unreadable(f"is not valid JSON ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(data, dict):
        kind = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(data), "null")
        raise Unreadable(f"holds a JSON {kind}, not an object")
    return upgrade_manifest(data), problems(data)


@dataclass(frozen=True)
class RunManifest:
    """A valid run.json as typed fields: the protocol as the collector's Protocol (every setting with its
    type), sessions and environment as recorded."""

    environment: dict[str, object]
    protocol: Protocol
    sessions: tuple[dict[str, object], ...]
    run_id: str | None = None
    schema_version: int | None = None
    preset: str | None = None
    description: str | None = None
    matrices: tuple[str, ...] = ()
    interleaved_with: tuple[str, ...] = ()
    merged_from: tuple[str, ...] = ()
    mixed: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: dict) -> "RunManifest":
        """From run.json as JSON (upgraded here); ValueError naming every breach of SCHEMA."""
        found = problems(data)
        if found:
            raise ValueError("; ".join(found[:5]))
        data = upgrade_manifest(data)
        known = {f.name for f in fields(cls)}
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in known}
        kw["protocol"] = Protocol(**{**asdict(Protocol()), **data["protocol"]})
        return cls(**kw)

    def to_json(self) -> dict:
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
        return {k: v for k, v in out.items() if v is not None and v != []}


def write_schema() -> str:
    """The text of run.schema.json (tests/test_manifest.py holds the file to it)."""
    return json.dumps(SCHEMA, indent=2) + "\n"


if __name__ == "__main__":  # python -m collector.record.manifest: print run.schema.json
    print(write_schema(), end="")
