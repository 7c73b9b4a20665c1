"""Step-time samples that are not finite positive times (NaN, inf, zero or negative: a broken timer or a
damaged file, never a measurement): left out where they stand, and the cells named (docs/statistics.md,
"One run")."""
from __future__ import annotations

SAMPLE_COLUMNS = ("eager_step_ms", "compiled_step_ms")
_BAD = "(x IS NULL OR NOT isfinite(x) OR x <= 0)"


def flagged_caveat(flagged: list) -> list[str]:
    """The verdict's caveat for cells whose samples were partly left out (none when there are none)."""
    return [f"{len(flagged)} cell(s) had step-time samples that are not finite positive times: left out, the "
            "rest reported (listed under the run's header)."] if flagged else []


def leave_out(con) -> list[tuple[str, str]]:
    """A step-time sample that is not a finite positive time (NaN, inf, zero or negative: a broken
    timer or a corrupt file, never a measurement) becomes NULL in place, so every process and block
    keeps its position; medians and quantiles (SQL and analysis/stats/core.py) leave NULLs out. Returns (cell file,
    what was left out) for each such cell: the report names them, and the rest is reported."""
    counts = ", ".join(f"list_filter({c}, lambda x: {_BAD}) AS bad_{i}, len({c}) AS n_{i}"
                       for i, c in enumerate(SAMPLE_COLUMNS))
    where = " OR ".join(f"len(list_filter({c}, lambda x: {_BAD})) > 0" for c in SAMPLE_COLUMNS)
    rows = con.execute(f"SELECT filename, cell_id, {counts} FROM cells_raw WHERE {where} ORDER BY filename").fetchall()
    if not rows:
        return []
    for c in SAMPLE_COLUMNS:
        con.execute(f"UPDATE cells_raw SET {c} = list_transform({c}, lambda x: CASE WHEN {_BAD} THEN NULL ELSE x END) "
                    f"WHERE len(list_filter({c}, lambda x: {_BAD})) > 0")
    emptied = _fail_emptied(con)
    out = []
    for filename, cell_id, *cols in rows:
        parts = []
        for i, side in enumerate(("eager", "compiled")):
            bad, n = cols[2 * i], cols[2 * i + 1]
            if bad:
                kinds = sorted({"NULL" if v is None else repr(v) if v != v or abs(v) == float("inf") else "<= 0"
                                for v in bad})
                parts.append(f"{len(bad)} of {n} {side} samples ({', '.join(kinds)})")
        why = "; ".join(parts) + " are not finite positive times: left out"
        if (filename, cell_id) in emptied:
            why += f"; no {emptied[(filename, cell_id)]} sample is left: counted as {NO_SAMPLES} (no step time)"
        out.append((filename or cell_id, why))
    return out


NO_SAMPLES = "runtime_error"  # the status of an ok row none of whose samples of a side is a time


def _fail_emptied(con) -> dict[tuple, str]:
    """Rows reported ok whose samples of a side were all left out: nothing to measure a step by. They
    become failures (status NO_SAMPLES, the reason appended to the error) in the loaded table only (the
    file stays as written), so the run report, the comparison and the gate count them as failed, never
    as ok cells with no figure. Returns {(file, cell id): the side(s) left empty}."""
    empty = {c: f"(len({c}) > 0 AND len(list_filter({c}, lambda x: x IS NOT NULL)) = 0)" for c in SAMPLE_COLUMNS}
    sides = " || ".join(f"CASE WHEN {cond} THEN '{c.split('_')[0]} ' ELSE '' END" for c, cond in empty.items())
    where = f"status = 'ok' AND ({' OR '.join(empty.values())})"
    found = {(f, c): s.strip().replace(" ", " and ") for f, c, s in
             con.execute(f"SELECT filename, cell_id, {sides} FROM cells_raw WHERE {where}").fetchall()}
    if found:
        con.execute(f"UPDATE cells_raw SET status = '{NO_SAMPLES}', error = coalesce(error || '; ', '') || "
                    f"'every step-time sample of a side is not a finite positive time (NaN, inf, zero or negative): "
                    f"no step time' WHERE {where}")
    return found
