from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from autotune.analysis.report import render_report, write_report

HISTORY = [
    {"number": 0, "batch_size": 32, "intra_op_threads": 0, "length_sort": False, "precision": "fp32",
     "state": "complete", "p95_ms": 300.0, "rejected": None},
    {"number": 1, "batch_size": 4, "intra_op_threads": 2, "length_sort": True, "precision": "fp32",
     "state": "complete", "p95_ms": 150.0, "rejected": None},
    {"number": 2, "batch_size": 4, "intra_op_threads": 2, "length_sort": True, "precision": "int8",
     "state": "complete", "p95_ms": 120.0, "rejected": "Spearman 0.8 < 0.98 <script>"},
    {"number": 3, "batch_size": 1, "intra_op_threads": 1, "length_sort": False, "precision": "fp32",
     "state": "pruned", "p95_ms": 400.0, "rejected": None},
]
PROFILE = {
    "name": "host-2c", "host": {"brand": "AMD EPYC", "cores": {"usable": 2}}, "model": {"name": "m"},
    "config": {"batch_size": 4, "intra_op_threads": 2, "length_sort": True, "precision": "fp32"},
    "metrics": {"p95_ms": 150.0, "baseline_p95_ms": 300.0, "speedup_p95": 2.0},
    "search": {"history": HISTORY},
    "parity": {"int8_vs_fp32": {"fp32": [0.1, 0.5, 0.9], "int8": [0.12, 0.48, 0.91]}},
    "explain": {"baseline_p95_ms": 300.0, "cumulative": [1.5, 2.0],
                "waterfall": [{"knob": "batch_size", "p95_ms": 200.0}, {"knob": "length_sort", "p95_ms": 150.0}]},
    "noise": {"warnings": ["repeats vary by 23%"]},
}


def test_report_is_self_contained_with_every_plot():
    text = render_report(PROFILE)
    assert text.count("Plotly.newPlot") == 4
    assert "<script src=" not in text  # plotly.js inlined: opens offline
    assert "repeats vary by 23%" in text and "<script>\"" not in text


def test_report_without_explain_or_int8_sample():
    text = render_report({**PROFILE, "explain": None, "parity": {}})
    assert text.count("Plotly.newPlot") == 2


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is absent (apt-get install chromium): browser rendering "
                                             "not checked")
def test_report_renders_in_headless_chromium(tmp_path):
    path = write_report(PROFILE, tmp_path / "report.html")
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'chrome'}", "--virtual-time-budget=10000", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120).stdout
    drawn = re.findall(r'<div id="plot\d"[^>]*class="[^"]*js-plotly-plot', dom)
    assert len(drawn) == 4, dom[:500]
    assert dom.count('class="main-svg"') >= 4
    assert dom.count('class="trace scatter') >= 5 and dom.count('class="bartext bartext-outside"') == 3


def test_the_chosen_line_reads_as_run_prints_it():
    """Issue 35: no `length sort True`, no `2.9661x`, and the fused graph named."""
    profile = {**PROFILE, "config": {**PROFILE["config"], "graph": "fused", "length_sort": True},
               "metrics": {**PROFILE["metrics"], "p95_ms": 100.04, "baseline_p95_ms": 296.61, "speedup_p95": 2.9661}}
    text = render_report(profile)
    assert "fused" in text and "sort=on" in text and "(2.97x" in text
    assert "length sort True" not in text and "2.9661x" not in text


def test_report_plots_the_pool_frontier_with_its_floor():
    scope = {"gate": {"min_mean": 0.95, "min_query": 0.8}, "frontier": [
        {"max_candidates": {}, "max_tokens_per_candidate": None, "p95_ms": 800.0, "passed": True,
         "agreement": {"mean": 1.0}},
        {"max_candidates": {"mid": 50}, "max_tokens_per_candidate": 128, "p95_ms": 300.0, "passed": True,
         "agreement": {"mean": 0.97}},
        {"max_candidates": {"mid": 20}, "max_tokens_per_candidate": None, "p95_ms": None, "passed": False,
         "agreement": {"mean": 0.7}}]}
    text = render_report({**PROFILE, "scope": scope})
    assert text.count("Plotly.newPlot") == 5
    assert "Result agreement against p95" in text and "mid pool 50, 128 tokens" in text
    assert "floor 0.95" in text
