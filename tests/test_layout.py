"""The code's layers are its folders (docs/layout.md). Each folder of collector/ and analysis/ is a floor:
a module imports from its own floor or the floors below, never above, and the import graph (imports inside
functions included) has no circle. Only the entry points (`__init__`, `__main__`) sit at a package's top
level. The analysis reads the collector only through its record layer and the mode registry; benchmarks/
and tests/ import nothing from each other, except the fault harness in tests/support that the reliability
benchmark drives; the collector imports nothing from analysis; no module passes 400 lines."""
import ast
import re
from pathlib import Path

import pytest

from conftest import ROOT

# each package's floors, lowest first (a folder's __init__ docstring says the same in words)
FLOORS = {
    "collector": ("modes", "record", "models", "plan", "child", "host", "slurm", "commands"),
    "analysis": ("data", "stats", "explain", "run_report", "compare_report", "render", "commands"),
}
# the collector's packages analysis may read: the record layer (the row schema, cell ids, the compact
# index, the manifest's upgrade path) and the mode registry (mode labels, without torch)
SHARED = {"collector.record", "collector.modes"}


def module_of(f: Path) -> str:
    return ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


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


def _project_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (a package's import counts as its __init__)."""
    files = {**imports("collector"), **imports("analysis")}
    known = {module_of(f) for f in files}
    return {module_of(f): {n for n in names if n in known and n != module_of(f)} for f, names in files.items()}


def _floor(module: str) -> int | None:
    top, *rest = module.split(".")
    if not rest or rest[0] in ("__main__",):
        return len(FLOORS[top])  # the package itself and its entry point: above every floor
    return FLOORS[top].index(rest[0]) if rest[0] in FLOORS[top] else None


def test_only_the_entry_points_sit_at_a_package_top_and_every_folder_is_a_floor():
    for top, floors in FLOORS.items():
        loose = sorted(f.name for f in (ROOT / top).glob("*.py") if f.stem not in ("__init__", "__main__"))
        assert loose == [], (top, loose)
        folders = sorted(d.name for d in (ROOT / top).iterdir() if d.is_dir() and (d / "__init__.py").exists())
        assert folders == sorted(floors), (top, folders)
        for name in floors:
            doc = ast.get_docstring(ast.parse((ROOT / top / name / "__init__.py").read_text()))
            assert doc and "May import" in doc, f"{top}/{name}/__init__.py says what the layer may import"


def test_no_module_imports_a_floor_above_its_own():
    upward = []
    for mod, deps in _project_graph().items():
        for dep in deps:
            if mod.split(".")[0] == dep.split(".")[0] and dep.count(".") and mod.count("."):
                if _floor(dep) > _floor(mod):
                    upward.append(f"{mod} -> {dep}")
    assert upward == []


def test_the_import_graph_has_no_circle():
    graph = _project_graph()
    state, circles = {}, []

    def visit(node, path):
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                circles.append(" -> ".join(path[path.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep, path + [dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert circles == []


def test_analysis_reads_the_collector_only_through_its_record_layer_and_the_modes():
    bad = {}
    for f, names in imports("analysis").items():
        used = _within(names, "collector")
        wrong = {n for n in used if n != "collector" and not any(n == s or n.startswith(s + ".") for s in SHARED)}
        if wrong:
            bad[f.name] = sorted(wrong)
    assert bad == {}


def test_the_shared_layers_need_no_torch_and_no_other_collector_layer():
    for f, names in imports("collector").items():
        mod = module_of(f)
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
    mods = sorted(module_of(f) for f in (ROOT / "analysis").rglob("*.py") if f.stem != "__main__")
    code = "import sys\n" + "".join(f"import {m}\n" for m in mods) + "print('torch' in sys.modules)"
    got = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "False"


def test_benchmarks_and_tests_import_nothing_from_each_other_and_the_collector_nothing_from_analysis():
    for folder, other in (("benchmarks", "tests"), ("tests", "benchmarks"), ("collector", "analysis")):
        hits = {f.name: sorted(n for n in _within(n, other) if not n.startswith("tests.support"))
                for f, n in imports(folder).items()}
        assert {k: v for k, v in hits.items() if v} == {}, (folder, other)
    assert not any(_within(n, "tests") for f, n in imports("collector").items())


def test_no_module_of_the_collector_or_the_analysis_passes_400_lines():
    long = {str(f.relative_to(ROOT)): n for folder in ("collector", "analysis")
            for f in (ROOT / folder).rglob("*.py") if (n := len(f.read_text().splitlines())) > 400}
    assert long == {}


@pytest.mark.evidence  # one such path is data/examples, the published runs the time-left estimate reads
def test_every_path_a_module_computes_from_its_own_place_exists():
    """A module moved one folder down keeps `Path(__file__).parent.parent` pointing at the wrong folder (the
    earlier-runs reader's published runs did, and the time-left estimate fell back to guesses); every
    module-level Path inside the checkout must exist (read in a fresh interpreter: the tests patch some)."""
    import subprocess
    import sys
    mods = sorted(module_of(f) for top in ("collector", "analysis") for f in (ROOT / top).rglob("*.py")
                  if f.stem != "__main__")
    code = ("import importlib, json, pathlib\nout = {}\n"
            f"for m in {mods!r}:\n"
            "    mod = importlib.import_module(m)\n"
            "    for k, v in vars(mod).items():\n"
            "        if isinstance(v, pathlib.Path) and v.is_absolute():\n"
            "            out[m + '.' + k] = str(v)\n"
            "print(json.dumps(out))")
    got = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    import json
    paths = {k: Path(v) for k, v in json.loads(got.stdout).items()}
    inside = {k: v for k, v in paths.items() if str(v).startswith(str(ROOT))}
    assert len(inside) >= 8, inside  # the project root, presets, SQL, schemas, templates, published runs, ...
    missing = {k: str(v) for k, v in inside.items() if not v.exists() and v.parent.name != "runs"}
    assert missing == {}


def test_no_function_of_the_collector_or_the_analysis_passes_60_lines():
    """Functions with one job: the command-line entry points, the fork server and the report builders
    were split until none is longer than about a screen."""
    long = {}
    for folder in ("collector", "analysis"):
        for f in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                    long[f"{f.relative_to(ROOT)}:{node.lineno} {node.name}"] = node.end_lineno - node.lineno + 1
    assert long == {}


def test_the_report_models_name_what_their_fields_hold():
    """Typed records across the hand-offs: the run and comparison reports' fields say what they hold
    (no bare `list` or `dict`), and run.json's record types its protocol."""
    import typing

    from analysis.compare_report.compare import CompareReport
    from analysis.run_report.context import RunReport
    from collector.record.manifest import RunManifest
    from collector.record.settings import Protocol

    for model in (RunReport, CompareReport, RunManifest):
        bare = {k: v for k, v in typing.get_type_hints(model).items() if v in (list, dict, tuple)}
        assert bare == {}, model.__name__
    assert typing.get_type_hints(RunManifest)["protocol"] is Protocol


# a path into the committed runs or published reports, as the tests write one
_EVIDENCE_PATH = re.compile(r'(ROOT|parents\[1\]|parent\.parent)\s*/\s*"(data|docs)"\s*/\s*"examples"'
                            r'|["\'](data|docs)/examples')


def _evidence_tests(path: Path) -> list[tuple[str, bool]]:
    """(test name, marked evidence) for each test function of a test module that reaches
    data/examples or docs/examples: directly, through a module-level name bound to such a path, or
    through a module-level helper that does."""
    src = path.read_text()
    tree = ast.parse(src)
    names = {t.id for node in tree.body if isinstance(node, ast.Assign)
             and _EVIDENCE_PATH.search(ast.get_source_segment(src, node))
             for t in node.targets if isinstance(t, ast.Name)}
    reaches = lambda seg, known: _EVIDENCE_PATH.search(seg) or any(re.search(rf"\b{n}\b", seg) for n in known)  # noqa: E731
    helpers = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
               and not node.name.startswith("test_") and reaches(ast.get_source_segment(src, node), names)}
    module_marked = any(isinstance(n, ast.Assign) and "pytestmark" in ast.get_source_segment(src, n)
                        and "evidence" in ast.get_source_segment(src, n) for n in tree.body)
    return [(node.name, module_marked or any("mark.evidence" in ast.unparse(d) for d in node.decorator_list))
            for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
            and reaches(ast.get_source_segment(src, node), names | helpers)]


def test_only_tests_marked_evidence_read_the_committed_runs_or_published_reports():
    """Tests own their fixtures (tests/fixtures, runs they write): a test that reads data/examples or
    docs/examples holds a documented claim to them and says so (`pytest.mark.evidence`), so that
    `pytest -m "not evidence"` needs neither folder (docs/layout.md says how that was checked)."""
    unmarked = [f"{path.name}::{name}" for path in sorted((ROOT / "tests").glob("test_*.py"))
                for name, marked in _evidence_tests(path) if not marked]
    assert not unmarked, unmarked
    found = [name for name, _ in _evidence_tests(ROOT / "tests" / "test_gate.py")]
    assert found, "the scan finds no evidence test in test_gate.py, which reads data/examples: the scan is broken"
