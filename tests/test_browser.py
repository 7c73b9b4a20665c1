"""The rendered HTML in a real browser (headless Chromium): hostile text stays inert text."""
import re
import shutil
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.context import build_run_report, prepare
from analysis.load import discover_runs, load
from analysis.render import render

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCRIPT = "<script>document.documentElement.setAttribute('data-pwned','script')</script>"
IMG = "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','img')\">"


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package (.ci/run installs it)")
def test_hostile_text_does_not_run_in_a_browser(fixture_copy, tmp_path):
    path = fixture_copy / "fixture-small" / "cells" / "gpt__train__amp_bf16__bs8__default__model.parquet"
    rows = pq.read_table(path).to_pylist()
    rows[0].update(model=SCRIPT, error=IMG + " | a | b\n" + "y" * 3000)
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    loaded = load(discover_runs(fixture_copy))
    prepare(loaded)
    _, html = render(build_run_report(loaded, loaded.runs[0], reps=100, now="x"), tmp_path / "out")
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                          html.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert "<h1>torch.compile report" in dom  # the page loaded
    assert "data-pwned" not in dom.split(">", 2)[1]  # no script changed the document element
    assert not re.search(r"<script\b|<img[^>]*onerror", dom)  # no such element exists in the DOM
    assert "&lt;script&gt;document.documentElement" in dom  # shown as text instead
