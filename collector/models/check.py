"""Check sourced model names in the interpreter that will measure them, before any cell runs.

    python -m collector.models.check REF [REF ...]   # prints {"unknown": [...], "missing": {...}}

`unknown`: one message per reference whose name its source does not know, with the closest valid
names (timm's model list, transformers' classes, the user module's functions); a `timm:` name is
checked against the list shipped with the project where timm does not import. `missing`: the
packages a source needs that this interpreter cannot import ({package: [refs]}); those cells become
`skipped` rows. A user module that fails to import is not judged here: its cells become build_error
rows naming the function, as any failure of the user's code does.
"""
from __future__ import annotations

import difflib
import importlib.util
import json
import sys

from collector.models import sources


def check(refs: list[str]) -> dict:
    unknown, missing = [], {}
    for ref in refs:
        name, opts = sources.parse(ref)
        kind = sources.kind_of(name)
        needs = {"timm": "timm", "hf": "transformers", "tv": "torchvision"}.get(kind)
        if needs and importlib.util.find_spec(needs) is None:
            try:
                if kind in LISTED:  # the shipped list: a misspelled name stops the collector here too
                    _check_listed(kind, name.partition(":")[2], live=False)
            except LookupError as exc:
                unknown.append(f"model {ref!r}: {exc}")
                continue
            missing.setdefault(needs, []).append(ref)
            continue
        try:
            if kind in LISTED:
                _check_listed(kind, name.partition(":")[2])
            elif kind == "hf":
                from collector.models import hf_source
                hf_source.make_config(hf_source.model_class(name.partition(":")[2]), opts, name.partition(":")[2])
            else:
                _check_user(name)
        except ImportError as exc:  # timm without torchvision, transformers without its needs
            try:
                if kind in LISTED:
                    _check_listed(kind, name.partition(":")[2], live=False)
            except LookupError as exc2:
                unknown.append(f"model {ref!r}: {exc2}")
                continue
            missing.setdefault(f"{needs} ({type(exc).__name__}: {exc})"[:300], []).append(ref)
        except (LookupError, ValueError) as exc:
            unknown.append(f"model {ref!r}: {exc}")
    return {"unknown": unknown, "missing": missing}


def _check_user(name: str) -> None:
    """LookupError when the user's module has no such function. Any other failure of the user's code
    (its module raises on import) is left to the cell processes: a build_error row naming the function."""
    try:
        sources.load_user_function(name)
    except LookupError:
        raise
    except Exception:
        pass


LISTED = {"timm": "timm", "tv": "torchvision"}  # sources whose names a package lists


def _check_listed(kind: str, name: str, live: bool = True) -> None:
    """LookupError when timm (kind 'timm') or torchvision ('tv') has no model `name`: the package's own
    list where it imports (`live`), else the list shipped with the project (collector/models/timm_names.py)."""
    package = LISTED[kind]
    if live and kind == "timm":
        import timm

        version, known = timm.__version__, timm.list_models()
    elif live:
        import torchvision
        import torchvision.models

        version, known = torchvision.__version__, torchvision.models.list_models()
    else:
        from collector.models import timm_names

        version, known = timm_names.shipped(package)
        version += f" (the list shipped with the project: {package} does not import in this interpreter)"
    base = name.partition(".")[0] if kind == "timm" else name  # a timm pretrained tag names a config
    if base not in known:
        close = difflib.get_close_matches(base, known, n=5, cutoff=0.6)
        raise LookupError(f"{package} {version} has no model {base!r}"
                          + (f"; closest: {', '.join(close)}" if close else
                             f"; its list names {len(known)}, e.g. {', '.join(known[:3])}"))


def check_in(python: str, refs: list[str], timeout_s: float | None = None) -> None:
    """Run `check` in the measuring interpreter `python` (the parent imports no torch). Raises
    ValueError naming every unknown model with the closest names, or a check that did not finish in
    `timeout_s` (the cell's limit, TIMEOUT=: a user's model file that hangs on import would hang it);
    prints which cells will be skipped for a package that interpreter lacks. Nothing to do for
    built-in models alone."""
    import subprocess

    sourced = sorted({r for r in refs if sources.kind_of(r)})
    if not sourced:
        return
    try:
        proc = subprocess.run([python, "-m", "collector.models.check", *sourced], cwd=sources.PROJECT_ROOT,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        users = [r for r in sourced if sources.kind_of(r) == "user"]
        raise ValueError(f"checking the model names with {python} did not finish in {timeout_s:g} s (the cell "
                         "limit, TIMEOUT=): importing a model's module hangs?"
                         + (f" Its user models: {', '.join(users)}" if users else "")) from None
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise ValueError(f"checking the model names with {python} failed: "
                         f"{(proc.stderr or proc.stdout).strip()[-600:]}") from None
    for package, which in found["missing"].items():
        hint = (f" (TORCH=2.14.1 has {package.split()[0]}, or install it)"
                if package.startswith(("timm", "torchvision")) else "")
        print(f"note: {package} does not import in {python}: {len(which)} model(s) will be skipped rows "
              f"({', '.join(which[:4])}{', ...' if len(which) > 4 else ''}){hint}; docs/models.md says what to install",
              file=sys.stderr)
    if found["unknown"]:
        raise ValueError("unknown model name(s), checked with " + python + ":\n  " + "\n  ".join(found["unknown"]))


def check_all(pythons: list[str], refs: list[str], timeout_s: float | None = None) -> None:
    """`check_in` in every interpreter that measures (timm/hf/user names), at once: a check imports the
    model packages (seconds an interpreter, before any cell; no measurement runs meanwhile). The first
    interpreter's error, in their order, is raised."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, len(pythons))) as pool:
        done = [pool.submit(check_in, py, refs, timeout_s) for py in pythons]
    for f in done:
        f.result()


if __name__ == "__main__":
    print(json.dumps(check(sys.argv[1:])))
