"""The project's contracts (collector/record/run.schema.json, the estimates.json schemas in
analysis/data/schemas/) checked with the `jsonschema` package (Draft 2020-12, every keyword), its
errors worded the way the readers of these messages take them apart: '$.cells[3].speedup: ...',
"$: missing 'status'", "$: unexpected 'extra'" (analysis/data/load.py drops the field a message names).

Where `jsonschema` is not installed (a bare GPU image's Python that only collects: the collect side
needs torch alone), a small checker of the keywords these schemas use stands in: type (one or a
list), enum, pattern, minimum, required, properties, additionalProperties (false or a schema),
items, minItems and maxItems; a keyword it does not know is an error there, so a schema cannot
silently ask it for more than it checks. tests/test_estimates_contract.py holds the two to the same
answers on the committed files and on broken ones. No torch.
"""
from __future__ import annotations

import json
import re


def errors(value, schema: dict, where: str = "$") -> list[str]:
    """Every way `value` breaks `schema`, each naming its path ('$.cells[3].speedup: ...');
    ValueError for a schema that is not valid JSON Schema."""
    try:
        import jsonschema
    except ImportError:
        return subset_errors(value, schema, where)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
    out = []
    for e in sorted(cls(schema).iter_errors(value), key=lambda e: [str(x) for x in e.absolute_path]):
        out += _worded(e, where)
    return out


def _path(where: str, parts) -> str:
    return where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _worded(e, where: str) -> list[str]:
    at, inst, kind, want = _path(where, e.absolute_path), e.instance, e.validator, e.validator_value
    if kind == "required":
        return [f"{at}: missing {k!r}" for k in want if isinstance(inst, dict) and k not in inst]
    if kind == "additionalProperties" and want is False and isinstance(inst, dict):
        props = e.schema.get("properties", {})
        return [f"{at}: unexpected {k!r}" for k in inst if k not in props]
    if kind == "type":
        kinds = want if isinstance(want, list) else [want]
        return [f"{at}: {type(inst).__name__} {json.dumps(inst)[:60]}, not {' or '.join(kinds)}"]
    if kind in ("minItems", "maxItems"):
        return [f"{at}: {len(inst)} items, not {e.schema.get('minItems', 0)} to {e.schema.get('maxItems', 'any')}"]
    if kind == "enum":
        return [f"{at}: {json.dumps(inst)[:60]} is not one of {want}"]
    if kind == "pattern":
        return [f"{at}: {inst[:60]!r} does not match {want}"]
    if kind == "minimum":
        return [f"{at}: {inst} is below {want}"]
    return [f"{at}: {e.message[:200]}"]


KNOWN = {"$schema", "title", "description", "type", "enum", "pattern", "minimum", "required", "properties",
         "additionalProperties", "items", "minItems", "maxItems"}
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[kind])


def subset_errors(value, schema: dict, where: str = "$") -> list[str]:
    """`errors` without the jsonschema package: the keywords in KNOWN only (the module's docstring)."""
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
                out += subset_errors(v, props[k], f"{where}.{k}")
            elif extra is False:
                out.append(f"{where}: unexpected {k!r}")
            elif isinstance(extra, dict):
                out += subset_errors(v, extra, f"{where}.{k}")
    if isinstance(value, list) and not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
        out.append(f"{where}: {len(value)} items, not {schema.get('minItems', 0)} to {schema.get('maxItems', 'any')}")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            out += subset_errors(v, schema["items"], f"{where}[{i}]")
    return out
