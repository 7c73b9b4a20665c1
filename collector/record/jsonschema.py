"""A small JSON Schema checker for the project's own contracts (collector/record/run.schema.json, the
estimates.json schemas in analysis/data/schemas/): type (one or a list), enum, pattern, minimum, required,
properties, additionalProperties (false or a schema), items, minItems and maxItems. Enough for those
files, without a dependency; a keyword it does not know is an error, so a schema cannot silently ask for
more than is checked. No torch.
"""
from __future__ import annotations

import json
import re

KNOWN = {"$schema", "title", "description", "type", "enum", "pattern", "minimum", "required", "properties",
         "additionalProperties", "items", "minItems", "maxItems"}
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[kind])


def errors(value, schema: dict, where: str = "$") -> list[str]:
    """Every way `value` breaks `schema`, each naming its path ('$.cells[3].speedup: ...')."""
    unknown = set(schema) - KNOWN
    if unknown:
        raise ValueError(f"schema keyword(s) not checked here: {', '.join(sorted(unknown))} (at {where})")
    out = []
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is(value, k) for k in kinds):
            return [f"{where}: {type(value).__name__} {json.dumps(value)[:60]}, not {' or '.join(kinds)}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{where}: {json.dumps(value)[:60]} is not one of {schema['enum']}")
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        out.append(f"{where}: {value[:60]!r} does not match {schema['pattern']}")
    if "minimum" in schema and _is(value, "number") and value < schema["minimum"]:
        out.append(f"{where}: {value} is below {schema['minimum']}")
    if isinstance(value, dict):
        out += [f"{where}: missing {k!r}" for k in schema.get("required", []) if k not in value]
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            if k in props:
                out += errors(v, props[k], f"{where}.{k}")
            elif extra is False:
                out.append(f"{where}: unexpected {k!r}")
            elif isinstance(extra, dict):
                out += errors(v, extra, f"{where}.{k}")
    if isinstance(value, list) and not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
        out.append(f"{where}: {len(value)} items, not {schema.get('minItems', 0)} to {schema.get('maxItems', 'any')}")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            out += errors(v, schema["items"], f"{where}[{i}]")
    return out
