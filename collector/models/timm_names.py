"""Model names of the packages that may not import where a collect runs, shipped with the project: the
name check there (collector/models/check.py).

    python -m collector.models.timm_names    # rewrite timm_models.txt and tv_models.txt from this interpreter's

A `timm:` or `tv:` reference is checked against `timm.list_models()` / `torchvision.models.list_models()`
where the package imports. Where it does not (the CPU build 2.13.0 has no torchvision that pairs with
it, so neither is installed there), a misspelled name would only become `skipped` rows; the shipped
list (the version the Makefile pins, its first line) catches it before any cell, with the closest
names, as the live list does.
"""
from __future__ import annotations

from pathlib import Path

LIST = Path(__file__).with_name("timm_models.txt")
LISTS = {"timm": LIST, "torchvision": Path(__file__).with_name("tv_models.txt")}


def shipped(package: str = "timm") -> tuple[str, list[str]]:
    """(the package's version, its model names) from the shipped list."""
    lines = LISTS[package].read_text().splitlines()
    return lines[0].removeprefix(f"# {package} ").strip(), [x for x in lines[1:] if x and not x.startswith("#")]


def write() -> str:
    import timm
    import torchvision
    import torchvision.models

    out = []
    for package, version, names, how in (("timm", timm.__version__, timm.list_models(), "timm.list_models()"),
                                         ("torchvision", torchvision.__version__, torchvision.models.list_models(),
                                          "torchvision.models.list_models()")):
        LISTS[package].write_text(f"# {package} {version}\n# {how}, written by python -m collector.models.timm_names\n"
                                  + "\n".join(names) + "\n")
        out.append(f"{LISTS[package]}: {package} {version}, {len(names)} names")
    return "\n".join(out)


if __name__ == "__main__":
    print(write())
