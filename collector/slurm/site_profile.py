"""A site's SLURM settings in one file (`--site-profile`, make `SITE_PROFILE=`), in the manner of a
Snakemake profile, and the defaults a task asks where neither the file nor the command line says
(docs/scale-out.md, "A site profile")."""
from __future__ import annotations

import subprocess

# a site profile's keys (--site-profile, make SITE_PROFILE=): docs/scale-out.md "A site profile"
PROFILE_KEYS = {"partition": str, "account": str, "constraint": str, "qos": str, "time": int, "parallelism": int,
                "cpus": int, "gpus": int, "gres": str, "mem": str, "exclusive": bool, "wckey": str,
                "setup": list, "sbatch": dict}
_OPT_OF = {"time": "time_min"}  # a profile key -> the command line's option name
DEFAULT_CPUS = 8  # Inductor compiles in parallel worker processes: one CPU a task compiles single-threaded


def read_profile(path: str) -> dict:
    """A site profile (TOML) as settings; ValueError naming an unknown key (with the valid ones) or a
    value of the wrong type."""
    import tomllib

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ValueError(f"site profile {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"site profile {path}: not valid TOML ({exc})") from None
    unknown = sorted(set(data) - set(PROFILE_KEYS))
    if unknown:
        raise ValueError(f"site profile {path}: unknown key(s) {', '.join(unknown)}; valid: {', '.join(PROFILE_KEYS)}")
    for key, kind in PROFILE_KEYS.items():
        v = data.get(key)
        if v is not None and (not isinstance(v, kind) or (kind is int and isinstance(v, bool))):
            raise ValueError(f"site profile {path}: {key} must be of type {kind.__name__}, got {v!r}")
    for key, lo in (("time", 1), ("parallelism", 1), ("cpus", 1), ("gpus", 0)):
        if data.get(key) is not None and data[key] < lo:
            raise ValueError(f"site profile {path}: {key} must be at least {lo}, got {data[key]!r}")
    if any(not isinstance(x, str) for x in data.get("setup") or []):
        raise ValueError(f"site profile {path}: setup is a list of shell lines (strings)")
    return data


def with_profile(opts: dict) -> dict:
    """The command line's SLURM options over the site profile's (opts["profile"], a path): an option
    given on the command line wins; the profile fills the rest."""
    if not opts.get("profile"):
        return opts
    prof = read_profile(opts["profile"])
    out = dict(opts)
    for key, value in prof.items():
        name = _OPT_OF.get(key, key)
        if key == "sbatch":
            given = {a.partition("=")[0].strip().lstrip("-") for a in opts.get("args") or []}
            out["args"] = [f"{k}={v}" if v is not True else k for k, v in value.items() if k not in given] \
                + list(opts.get("args") or [])
        elif key == "exclusive":
            out["exclusive"] = bool(opts.get("exclusive")) or value
        elif out.get(name) is None:
            out[name] = value
    return out


def partition_cpus(partition: str | None) -> int | None:
    """The fewest CPUs of a node in the partition (the default one without it), from sinfo; None when
    sinfo cannot say."""
    cmd = ["sinfo", "-h", "-o", "%c"] + (["-p", partition] if partition else [])
    try:
        got = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout.split()
        return min(int(x.rstrip("+")) for x in got) if got else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
