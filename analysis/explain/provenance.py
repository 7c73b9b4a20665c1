"""Where and how a run's cells were measured, for the report's notes: the executor (local,
SLURM, merged shards), the hosts and boots, mixed builds, and the cells that ran beside another.
All from run.json and the rows (each row says its host and how many cells measured at once on
it, collector/host/neighbours.py)."""
from __future__ import annotations

import json

from collector.record.contract import NODE_JOBS  # written by collector/slurm/task.py


def other_jobs(run, all_rows: list[dict]) -> dict[str, list[str]]:
    """cell id -> the other users' jobs that ran on its SLURM node while it was measured (asked of
    squeue before and after), for the cells with a row; cells without a record are left out."""
    out = {}
    logs = run.path / "logs"
    for r in all_rows:
        path = logs / f"{r['cell_id']}{NODE_JOBS}"
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        seen = sorted(set(rec.get("before") or []) | set(rec.get("after") or []))
        if seen:
            out[r["cell_id"]] = seen
    return out


def _hosts(run, all_rows: list[dict]) -> tuple[list[str], set]:
    sessions = run.manifest.get("sessions", [])
    # the rows' hosts too: a SLURM run's cells ran on nodes its sessions (the submitter) never saw
    hosts = sorted({s.get("hostname") for s in sessions if s.get("hostname")}
                   | {r.get("hostname") for r in all_rows if r.get("hostname")})
    return hosts, {s.get("boot_id") for s in sessions if s.get("boot_id")}


def several_machines(run, all_rows: list[dict]) -> bool:
    hosts, boots = _hosts(run, all_rows)
    return len(hosts) > 1 or len(boots) > 1


def _per_host(all_rows: list[dict]) -> str:
    counts: dict = {}
    for r in all_rows:
        counts[r.get("hostname") or "?"] = counts.get(r.get("hostname") or "?", 0) + 1
    return ", ".join(f"{h} ({n} cell{'s' if n != 1 else ''})" for h, n in sorted(counts.items()))


def collection_notes(run, all_rows: list[dict]) -> list[str]:
    """How the run was collected (only where it was not one local collector) and what that means."""
    notes = []
    sessions = run.manifest.get("sessions", [])
    slurm = [s for s in sessions if s.get("executor") == "slurm"]
    if slurm:
        arrays = sorted({a for s in slurm for a in s.get("slurm_arrays") or []}, key=lambda a: (len(a), a))
        notes.append(f"Collected through SLURM: {len(slurm)} submission{'s' if len(slurm) != 1 else ''}"
                     + (f" (job arrays {', '.join(arrays)})" if arrays else "")
                     + f"; cells ran on {_per_host(all_rows)}.")
    merged = run.manifest.get("merged_from") or []
    if merged:
        notes.append(f"Merged from {len(merged)} shards ({', '.join(str(m) for m in merged)}); cells ran on "
                     f"{_per_host(all_rows)}.")
    for key, what in (("torch_version", "torch build"), ("device_name", "device")):
        seen: dict = {}
        for r in all_rows:
            if r.get(key):
                seen[r[key]] = seen.get(r[key], 0) + 1
        if len(seen) > 1:
            notes.append(f"This run mixes {what}s: " + ", ".join(f"{v} ({n} cells)" for v, n in sorted(seen.items()))
                         + f" (collected with ALLOW_MIXED=1, or merged with --allow-mixed): compare cells of one {what}.")
    hosts, boots = _hosts(run, all_rows)
    if len(hosts) > 1:
        notes.append(f"Collected on {len(hosts)} different machines ({', '.join(hosts)}); "
                     "compare cells from one machine where the difference matters.")
    elif len(boots) > 1:
        notes.append(f"Collected on {len(boots)} different machines or boots (kernel boot ids differ, hostname "
                     f"{hosts[0] if hosts else '?'} the same): host-bound steps can differ between machines of one "
                     "kind; compare cells from one machine where the difference matters.")
    beside = other_jobs(run, all_rows) if slurm else {}  # only SLURM tasks write the record
    if beside:
        jobs = sorted({j for js in beside.values() for j in js})
        notes.append(f"{len(beside)} of {len(all_rows)} cells ran on a SLURM node where other jobs ran at the same "
                     f"time ({', '.join(jobs[:3])}{f' and {len(jobs) - 3} more' if len(jobs) > 3 else ''}; "
                     "squeue, asked before and after each cell): they share the node's CPUs and perhaps its GPU, "
                     "which slows launch-bound steps, and GPU-bound ones on a shared GPU. SLURM_EXCLUSIVE=1 "
                     "reserves the node.")
    notes += _concurrency_notes(all_rows)
    settings = (run.manifest.get("environment") or {}).get("compile_env") or ""
    if settings:  # recorded since 2026-12-02 (collector.host.envinfo.compile_env)
        notes.append(f"Collected with torch.compile settings in the environment: {settings}. They apply to every "
                     "compiled cell"
                     + ("; with TORCH_LOGS the compiles also write their logs, which can lengthen the first "
                        "calls, not the timed steps" if "TORCH_LOGS=" in settings else "") + ".")
    return notes + _session_notes(sessions)


def _concurrency_notes(all_rows: list[dict]) -> list[str]:
    """What the rows' concurrent_cells say: the cells that ran beside another, and how."""
    concurrent = [r for r in all_rows if (r["concurrent_cells"] or 1) > 1]
    if not concurrent:
        return []
    head = (f"{len(concurrent)} of {len(all_rows)} cells were measured with up to "
            f"{max(int(r['concurrent_cells']) for r in concurrent)} cells running at once on ")
    if any(r.get("timing_wait_s") for r in concurrent):  # GPUS=0,0: workers sharing a GPU, timed in turn
        return [head + "this host, sharing a GPU (GPUS=0,0): their timed blocks took turns and the others' work on "
                "the GPU waited for each, but each was timed beside the others' host work (their compiles, on their "
                "own cores). On an H200 that left GPU-bound steps within 2% of alone and moved launch-bound ones by "
                "-10% to +79%, on an H100 host not beyond its A/A (docs/scale-out.md): quote a launch-bound figure "
                "from cells measured alone. Their cold compiles shared the cores with the others' compiles, so "
                "a compile time (and the steps it takes to pay off) is longer than alone and varies more."]
    if len({r.get("gpu_index") for r in concurrent}) > 1:  # this collector's GPU workers, one per GPU
        return [head + "this host, one per GPU, the CPU cores split between them (column gpu). GPU-bound steps are "
                "unaffected; launch-bound ones share the host with a neighbour that may be compiling: see the eager "
                "baselines across cells."]
    # seen on the host: nothing says which GPU the neighbour used
    return [head + "their host, seen measuring on the host beside them (a shard, another collector, or SLURM tasks "
            "that the scheduler put on one node; SLURM_EXCLUSIVE=1 avoids it). A neighbour on the same GPU slows "
            "every step, GPU-bound ones too (on the H200 a ResNet-18 eager step took 16.1 ms beside another "
            "collector's cell against 7.5 ms alone): measure these cells again alone before quoting them."]


def _session_notes(sessions: list) -> list[str]:
    """What the person collecting wrote down with each session (--note, NOTE=)."""
    return [f"Noted with the session started {s.get('started_at') or '(time not recorded)'}: {s['note'].strip()[:500]}"
            for s in sessions if isinstance(s.get("note"), str) and s["note"].strip()]
