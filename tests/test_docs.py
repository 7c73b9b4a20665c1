"""The README leads with the verdict of the shipped H200 example exactly as the report writes it:
the quoted block under "The answer first" is the rendered summary.md it links to (verdict, table,
caveats). Re-rendering the example without restating the README fails here."""
import pytest
import re

from conftest import ROOT


def _readme_quote() -> tuple[str, list[str]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## The answer first", 1)[1].split("\n## ", 1)[0]
    example = re.search(r"\(docs/examples/([^/]+)/summary\.md\)", section).group(1)
    quoted, started = [], False
    for line in section.splitlines():
        if line.startswith(">"):
            started = True
            quoted.append(line[2:] if line.startswith("> ") else "")
        elif started:
            break
    return example, quoted


@pytest.mark.evidence
def test_the_readme_verdict_is_the_shipped_examples_summary():
    example, quoted = _readme_quote()
    from analysis.stats.fmt import verdict_block

    body = verdict_block((ROOT / "docs" / "examples" / example / "summary.md").read_text())
    assert quoted == body
    assert f"data/examples/{example}" in (ROOT / "README.md").read_text().split("## Quick start")[0]


@pytest.mark.evidence
def test_the_readme_comparison_verdict_is_the_published_comparisons_summary():
    """The README quotes the verdict of the published H200 version comparison: re-rendering that
    example without restating the README fails."""
    readme = (ROOT / "README.md").read_text().split("## Comparing two PyTorch versions")[1]
    quoted = [line[2:] for line in readme.splitlines() if line.startswith("> - ")]
    summary = (ROOT / "docs" / "examples" / "compare-v-h200-torch2.11.0-cu130-vs-v-h200-torch2.14.1-cu130"
               / "summary.md").read_text()
    verdict = [line for line in summary.split("Before you quote these:")[0].splitlines() if line.startswith("- ")]
    assert quoted and quoted == verdict


@pytest.mark.evidence
def test_the_readme_suite_table_is_the_published_suite_confirmations():
    """The version section leads with the suite table of the published suite confirmation, as rendered:
    calls made with 3 processes a cell, not a screen's estimates."""
    readme = (ROOT / "README.md").read_text().split("## Comparing two PyTorch versions")[1].split("\n## ")[0]
    quoted = [line[2:] for line in readme.splitlines() if line.startswith("> |")]
    summary = (ROOT / "docs" / "examples" / "compare-su-h100c-torch2.11.0-cu130-vs-su-h100c-torch2.14.1-cu130"
               / "summary.md").read_text()
    table = [line for line in summary.split("**Per suite.**")[1].split("\n\n")[1].splitlines() if line.startswith("|")]
    assert quoted and quoted == table
    assert not any("a screen" in line for line in quoted)  # a screen's row reads "a screen: not called"
    assert any("(higher;" in line or "(lower;" in line for line in quoted)
    assert readme.index("> |") < readme.index("> - ")  # the suites first, then the built-in models' verdict


@pytest.mark.evidence
def test_the_readme_is_short_and_every_doc_it_names_exists():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    for path in re.findall(r"\]\(((?:docs|data)/[^)#]+)\)", text):
        assert (ROOT / path).exists(), path


def test_the_wheel_packages_every_module_and_data_file():
    """`pip install .` must give a working tool: every folder of Python modules or data under collector/
    and analysis/ is a package setuptools finds (pyproject's packages.find, not a list kept by hand),
    and the presets, SQL, schemas, timm's names and templates travel as package data."""
    import tomllib

    from setuptools import find_namespace_packages

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert isinstance(conf["packages"], dict), "packages are found (tool.setuptools.packages.find), not listed"
    listed = set(find_namespace_packages(where=str(ROOT), include=conf["packages"]["find"]["include"]))
    for top in ("collector", "analysis"):
        for d in [ROOT / top, *(p for p in (ROOT / top).rglob("*") if p.is_dir() and p.name != "__pycache__")]:
            if any(d.glob("*.py")) or any(d.glob("*.sql")) or any(d.glob("*.toml")) or any(d.glob("*.json")):
                assert ".".join(d.relative_to(ROOT).parts) in listed, d
            for ext in ("sql", "toml", "json", "txt"):
                if any(d.glob(f"*.{ext}")):
                    pkg = ".".join(d.relative_to(ROOT).parts)
                    assert f"*.{ext}" in conf["package-data"].get(pkg, []), (pkg, ext)
    assert "report_templates" in listed and "*.j2" in conf["package-data"]["report_templates"]


@pytest.mark.evidence
def test_the_docs_are_references_of_at_most_about_400_lines_with_no_campaign_diary():
    """docs/ by topic, each short enough to read; they speak of runs, machines and dates, never of
    the project's working sessions or machine leases (history lives in git)."""
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "data" / "examples" / "INDEX.md"]
    long = {p.name: n for p in docs if p.parent.name == "docs" and (n := len(p.read_text().splitlines())) > 400}
    assert long == {}
    diary = re.compile(r"\bleases?\b|\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|"
                       r"twelfth|thirteenth|next|this|that|previous|earlier) (H200 |GPU )?session\b|\bH200 session", re.I)
    # the collector's own messages say "this session" of one collecting command: quoted, they are not prose
    found = {f"{p.relative_to(ROOT)}:{i}": m.group(0) for p in docs
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if (m := diary.search(re.sub(r'"[^"]*"', '""', line)))}
    assert found == {}


def test_the_data_reference_names_every_column_of_the_schema():
    """docs/data.md's column table is checked against collector/record/schema.py: every column is named
    (a `prefix_*` pattern covers a family), and the heading says the current schema version."""
    import fnmatch

    from collector.record.schema import COLUMNS, SCHEMA_VERSION

    text = (ROOT / "docs" / "data.md").read_text()
    section = text.split("## Columns (schema version ", 1)[1].split("\n## ", 1)[0]
    assert section.startswith(f"{SCHEMA_VERSION})")
    named = set(re.findall(r"`([a-z0-9_*]+)`", section))
    missing = [c for c in COLUMNS if not any(fnmatch.fnmatchcase(c, n) for n in named)]
    assert missing == []


def test_the_options_reference_names_every_make_variable():
    """docs/options.md is checked against the Makefile: every variable make accepts is documented."""
    make = (ROOT / "Makefile").read_text()
    known = re.search(r"KNOWN_VARS := (.*?)\nUNKNOWN_VARS", make, re.S).group(1).replace("\\", " ").split()
    fragment = (ROOT / "collector" / "commands" / "options.mk").read_text()  # the collect variables, included
    known = [v for v in known if v != "$(COLLECT_VARS)"] + re.search(r"^COLLECT_VARS := (.*)$", fragment, re.M).group(1).split()
    assert len(known) > 60
    text = (ROOT / "docs" / "options.md").read_text()
    missing = [v for v in known if not re.search(rf"\b{v}=|`{v}`", text)]
    assert missing == []
