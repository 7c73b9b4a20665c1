"""The code's layers, held (issue: one way through the code): analysis reads the collector only through
its torch-free contract modules; benchmarks/ and tests/ import nothing from each other; the collector
imports nothing from analysis; no module of collector/ or analysis/ grows past 400 lines."""
import ast
from pathlib import Path

from conftest import ROOT

# the collector's modules analysis may read: the contract (schema, statuses, cell ids, mode labels: the
# modes package declares modes without torch), the row schema and the compact index
SHARED = {"collector.contract", "collector.compact", "collector.schema", "collector.modes"}


def imports(folder: str) -> dict[Path, set[str]]:
    """{file: every absolute module name it imports, `from a import b` as both a and a.b}."""
    out = {}
    for f in sorted((ROOT / folder).rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        out[f] = names
    return out


def _within(names: set[str], top: str) -> set[str]:
    return {n for n in names if n == top or n.startswith(top + ".")}


def test_analysis_reads_the_collector_only_through_its_shared_modules():
    bad = {}
    for f, names in imports("analysis").items():
        used = _within(names, "collector")
        # `from collector import contract` names the module as collector.contract
        wrong = {n for n in used if n != "collector" and not any(n == s or n.startswith(s + ".") for s in SHARED)}
        if wrong:
            bad[f.name] = sorted(wrong)
    assert bad == {}


def test_the_shared_modules_need_no_torch_and_no_other_collector_module():
    files = imports("collector")
    for f, names in files.items():
        mod = ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        if not any(mod == s or mod.startswith(s + ".") for s in SHARED):
            continue
        assert not _within(names, "torch") and not _within(names, "duckdb"), mod
        others = {n for n in _within(names, "collector") if n != "collector"
                  and not any(n == s or n.startswith(s + ".") for s in SHARED)}
        assert others == set(), (mod, others)


def test_the_whole_analysis_imports_without_torch():
    """Rendering a report needs no torch: every analysis module imported, torch is not loaded."""
    import subprocess
    import sys
    mods = sorted(f.stem for f in (ROOT / "analysis").glob("*.py") if f.stem != "__init__")
    code = ("import sys\n" + "".join(f"import analysis.{m}\n" for m in mods)
            + "print('torch' in sys.modules)")
    got = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "False"


def test_benchmarks_and_tests_import_nothing_from_each_other_and_the_collector_nothing_from_analysis():
    for folder, other in (("benchmarks", "tests"), ("tests", "benchmarks"), ("collector", "analysis")):
        hits = {f.name: sorted(_within(n, other)) for f, n in imports(folder).items() if _within(n, other)}
        assert hits == {}, (folder, other, hits)


def test_no_module_of_the_collector_or_the_analysis_passes_400_lines():
    long = {str(f.relative_to(ROOT)): n for folder in ("collector", "analysis")
            for f in (ROOT / folder).rglob("*.py") if (n := len(f.read_text().splitlines())) > 400}
    assert long == {}
