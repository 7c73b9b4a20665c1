"""The collect command's options are one table (collector/commands/options.py, with the protocol's settings
from collector/record/settings.py): the parser is built from it, and the Makefile, `make help` and
docs/options.md are held to it here, so adding an option is one table entry plus its use. An option the
chosen executor would not use is refused by name (STOP_AFTER was ignored silently by EXECUTOR=slurm)."""
import re
import subprocess
import sys

import pytest

from collector.__main__ import main, parse_args
from collector.commands import options
from conftest import ROOT

MAKEFILE = (ROOT / "Makefile").read_text() + (ROOT / "collector" / "commands" / "options.mk").read_text()


def _passes(o: options.Option) -> bool:
    """Does the Makefile's COLLECT_ARGS pass variable o.make as option o.cli?"""
    v, c = re.escape(o.make), re.escape(o.cli)
    if o.switch:
        return re.search(rf"\$\(if \$\(call on,\$\({v}\)\),{c}\)", MAKEFILE) is not None
    if o.kind == "append":
        return re.search(rf"\$\(foreach (\w),\$\({v}\),{c} \$\(call sq,\$\(\1\)\)\)", MAKEFILE) is not None
    return f"$(call opt,{o.cli},$({o.make}))" in MAKEFILE or f'{o.cli} $(call sq,$({o.make}))' in MAKEFILE


def test_every_option_with_a_make_variable_is_known_passed_and_listed_by_make_help():
    known = set(re.search(r"KNOWN_VARS := (.*?)\n[A-Z_]+ :=", MAKEFILE, re.S).group(1).replace("\\", " ").split())
    if "$(COLLECT_VARS)" in known:  # the fragment's list, as make expands it
        known |= set(re.search(r"^COLLECT_VARS := (.*)$", MAKEFILE, re.M).group(1).split())
    helped = subprocess.run(["make", "-s", "help", "PYTHON=python3"], cwd=ROOT, capture_output=True, text=True).stdout
    missing = {}
    for o in options.all_options():
        if not o.make:
            continue
        why = [w for w, bad in (("not in KNOWN_VARS", o.make not in known), (f"not passed as {o.cli}", not _passes(o)),
                                ("not listed by make help", not re.search(rf"\b{o.make}=", helped))) if bad]
        if why:
            missing[o.make] = why
    assert missing == {}


def test_the_makefile_fragment_is_what_the_table_writes_and_the_makefile_uses_it():
    """Adding an option is one table entry plus its use: `python -m collector.commands.options --write`
    writes the Makefile's part (options.mk) and the docs' table; this fails when either is stale."""
    assert (ROOT / "collector" / "commands" / "options.mk").read_text() == options.make_fragment()
    makefile = (ROOT / "Makefile").read_text()
    assert "include collector/commands/options.mk" in makefile and "$(COLLECT_OPTION_ARGS)" in makefile
    assert "$(COLLECT_VARS)" in makefile.split("UNKNOWN_VARS", 1)[0]  # the check of unknown variables knows them


def test_the_parser_is_the_table():
    p_opts = {a.option_strings[0]: a.dest for a in __import__("argparse").ArgumentParser()._actions[:0]}
    args = parse_args([])
    for o in options.all_options():
        assert hasattr(args, o.dest), o.cli
    assert p_opts == {}
    got = parse_args(["--processes", "5", "--tf32", "1", "--plant-slowdown", "3", "--timeout", "60", "--slurm-arg",
                      "gres=gpu:1", "--slurm-arg", "exclusive", "--models", "mlp,gpt:layers=2,seq_len=64"])
    assert (got.processes, got.tf32, got.plant_slowdown_pct, got.timeout_s) == (5, "1", 3, 60)
    assert got.slurm_args == ["gres=gpu:1", "exclusive"] and got.models == ["mlp", "gpt:layers=2,seq_len=64"]
    assert parse_args([]).slurm_args == [] and parse_args([]).stop_after is None


def test_docs_options_holds_the_table_the_module_prints():
    text = (ROOT / "docs" / "options.md").read_text()
    table = options.reference_table()
    assert table in text, "docs/options.md's reference table is stale: python -m collector.commands.options prints it"
    got = subprocess.run([sys.executable, "-m", "collector.commands.options"], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert got.stdout == table


@pytest.mark.parametrize("argv, named", [
    (["--executor", "slurm", "--preset", "smoke", "--stop-after", "60"], "--stop-after (STOP_AFTER=)"),
    (["--executor", "slurm", "--preset", "smoke", "--gpus", "all"], "--gpus (GPUS=)"),
    (["--preset", "smoke", "--slurm-partition", "gpu", "--slurm-exclusive"],
     "--slurm-partition (SLURM_PARTITION=), --slurm-exclusive (SLURM_EXCLUSIVE=)"),
])
def test_an_option_the_executor_would_not_use_is_refused_by_name(argv, named, tmp_path, capsys):
    assert main([*argv, "--out", str(tmp_path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert named in err and "not used by EXECUTOR=" in err, err
    assert not any(tmp_path.iterdir())


def test_an_option_added_by_one_table_entry_reaches_run_json_and_the_report(tmp_path):
    """--note (NOTE=) was added as one table entry plus its use (the session records it): the parser, the
    Makefile, make help and docs/options.md followed from the table."""
    import json
    import os

    from support.faults import fake_python

    assert 'NOTE' in re.search(r"^COLLECT_VARS := (.*)$", MAKEFILE, re.M).group(1).split()
    assert '$(call opt,--note,$(NOTE))' in MAKEFILE and "`NOTE`" in (ROOT / "docs" / "options.md").read_text()
    env = dict(os.environ, FAKE_CELL_SECONDS="0.05", PYTHONPATH=str(ROOT))
    got = subprocess.run([sys.executable, "-m", "collector", "--preset", "smoke", "--models", "mlp", "--modes", "default",
                          "--phases", "infer", "--out", str(tmp_path), "--run-id", "r", "--python", fake_python(tmp_path),
                          "--note", "driver updated this morning"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert got.returncode == 0, got.stderr
    sessions = json.loads((tmp_path / "r" / "run.json").read_text())["sessions"]
    assert sessions[-1]["note"] == "driver updated this morning"
    from analysis.__main__ import main as analysis_main
    assert analysis_main(["--data", str(tmp_path), "--out", str(tmp_path / "o"), "--reps", "50"]) == 0
    assert "driver updated this morning" in (tmp_path / "o" / "r" / "report.md").read_text()


def test_make_help_names_every_target_and_only_docs_that_exist():
    """`make help` as a user sees it: one line per target by its name (not the makefile's), every
    target with a `##` description listed, and every docs/ path it prints present."""
    import re
    import subprocess

    from conftest import ROOT

    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    listed = re.findall(r"^  make (\S+)\s", out, re.M)
    assert "Makefile" not in listed and not any(t.endswith(".mk") for t in listed)
    targets = re.findall(r"^([a-z-]+):.*## ", (ROOT / "Makefile").read_text(), re.M)
    assert targets and set(targets) <= set(listed)
    docs = set(re.findall(r"docs/[\w./-]+\.md", out))
    assert docs and all((ROOT / d).is_file() for d in docs), sorted(d for d in docs if not (ROOT / d).is_file())


@pytest.mark.parametrize("target, var", [("collect", "RUN"), ("collect", "MODELS"), ("report", "BASELINE"),
                                         ("gate", "CANDIDATE"), ("merge", "SHARDS")])
def test_a_make_variable_reaches_the_command_as_one_word_never_as_shell_code(target, var, tmp_path):
    """`make collect RUN='x`touch PWNED`'` once ran the command, and a `"` split the command line: every
    value now reaches the program as one literal argument (a stand-in interpreter prints its argv).
    (`$(...)` in a value is make's own variable syntax, expanded by make, never by the shell.)"""
    import subprocess

    from conftest import ROOT

    fake = tmp_path / "py"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "<%s>\\n" "$a"; done\n')
    fake.chmod(0o755)
    hostile = "x`touch PWNED`;touch PWNED2 \"q' y"
    extra = {"report": ["CANDIDATE=b"], "gate": ["BASELINE=a"], "merge": ["RUN=m"]}.get(target, [])
    proc = subprocess.run(["make", "-s", "-C", str(ROOT), target, f"PYTHON={fake}", f"{var}={hostile}", *extra],
                          capture_output=True, text=True)
    assert not (ROOT / "PWNED").exists() and not (ROOT / "PWNED2").exists()
    words = proc.stdout.splitlines()
    if var == "SHARDS":  # a list: one word per space-separated entry, none of them run
        assert {"<x`touch>", "<PWNED`;touch>", "<PWNED2>", "<\"q'>", "<y>"} <= set(words), proc.stdout + proc.stderr
    else:
        assert f"<{hostile}>" in words, proc.stdout + proc.stderr


def test_a_bad_value_is_one_line_naming_the_option_and_its_make_variable(capsys):
    """`BATCH_SIZES=abc` once buried its one line under 28 lines of argparse usage and named only
    --batch-sizes: now the line names both, with where the valid options are, exit 2."""
    from collector.__main__ import parse_args

    with pytest.raises(SystemExit) as exc:
        parse_args(["--batch-sizes", "abc"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 2 and "usage:" not in err
    assert "argument --batch-sizes (BATCH_SIZES=): expected comma-separated integers, got 'abc'" in err


def test_the_installed_commands_are_the_two_entry_points():
    """pyproject's [project.scripts]: compile-bench-collect and compile-bench-report call the same main()
    as python -m collector and python -m analysis (a pip install gives them, no checkout needed)."""
    import importlib
    import tomllib

    from conftest import ROOT

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == {"compile-bench-collect", "compile-bench-report", "compile-bench-gate", "compile-bench-confirm"}
    for target in scripts.values():
        module, func = target.split(":")
        assert callable(getattr(importlib.import_module(module), func))
    assert scripts["compile-bench-collect"] == "collector.__main__:main"
    assert scripts["compile-bench-report"] == "analysis.__main__:main"


def test_the_installed_gate_and_confirm_are_the_modules_subcommands(monkeypatch, capsys):
    """compile-bench-gate ARGS is python -m analysis gate ARGS (one line and exit 2 on an unknown run)."""
    import analysis.__main__ as am

    monkeypatch.setattr(sys, "argv", ["compile-bench-gate", "--baseline", "nope-a", "--candidate", "nope-b"])
    assert am.gate_main() == 2 and "unknown run(s) nope-a" in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", ["compile-bench-confirm", "--threshold", "abc", "--baseline", "a", "--candidate", "b"])
    code = am.confirm_main()
    assert code == 2 and "unknown run(s) a" in capsys.readouterr().err


def test_an_installed_collector_writes_runs_under_the_current_folder(monkeypatch, tmp_path):
    """Installed, the package sits in site-packages (no data/ beside it): runs go to ./data/runs of the
    folder the command runs in, not into site-packages; in a checkout, to the checkout's data/runs."""
    import collector.__main__ as cm

    assert cm.parse_args([]).out == str(cm.PROJECT_ROOT / "data" / "runs")
    monkeypatch.setattr(cm, "PROJECT_ROOT", tmp_path / "site-packages")
    monkeypatch.chdir(tmp_path)
    assert cm.parse_args([]).out == str(tmp_path / "data" / "runs")


HELP_COMMANDS = [["-m", "analysis"], ["-m", "analysis", "confirm"], ["-m", "analysis", "gate"], ["-m", "collector"],
                 ["-m", "collector", "shard"], ["-m", "collector", "merge"]]


def test_every_command_line_prints_its_help():
    """`--help` of every command and benchmark script exits 0 with its usage: argparse formats each help
    text with %, so a literal '%' in one ('default 10%)') broke `python -m analysis confirm --help`."""
    scripts = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if "argparse" in p.read_text())
    assert len(scripts) >= 10
    for args in HELP_COMMANDS + [[str(p.relative_to(ROOT))] for p in scripts]:
        got = subprocess.run([sys.executable, *args, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert got.returncode == 0 and "usage:" in got.stdout, (args, got.stderr[-300:])
