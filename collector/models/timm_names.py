"""timm's model names, shipped with the project: the name check where timm does not import.

    python -m collector.models.timm_names    # rewrite timm_models.txt from the timm this interpreter imports

A `timm:` reference is checked against `timm.list_models()` where timm imports. Where it does not
(the CPU build 2.13.0 has no torchvision that pairs with it, so timm is not installed there), a
misspelled name would only become `skipped` rows; the shipped list (the timm version the Makefile
pins, its first line) catches it before any cell, with the closest names, as the live list does.
"""
from __future__ import annotations

from pathlib import Path

LIST = Path(__file__).with_name("timm_models.txt")


def shipped() -> tuple[str, list[str]]:
    """(timm version, its model names) from the shipped list."""
    lines = LIST.read_text().splitlines()
    return lines[0].removeprefix("# timm ").strip(), [x for x in lines[1:] if x and not x.startswith("#")]


def write() -> str:
    import timm

    names = timm.list_models()
    LIST.write_text(f"# timm {timm.__version__}\n# timm.list_models(), written by python -m collector.models.timm_names\n"
                    + "\n".join(names) + "\n")
    return f"{LIST}: timm {timm.__version__}, {len(names)} names"


if __name__ == "__main__":
    print(write())
