"""`autotune report`: one self-contained HTML file with the study's plots (plotly, inlined)."""

from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from autotune.fileio import write_atomic


def _threads(t: int) -> str:
    return "default" if t == 0 else str(t)


def p95_vs_batch(history: list[dict[str, Any]]) -> go.Figure:
    lines: dict[tuple[str, str, str], dict[int, float]] = defaultdict(dict)
    for t in history:
        if t.get("state") == "complete" and t.get("p95_ms") is not None and not t.get("rejected"):
            key = (_threads(t["intra_op_threads"]), t["precision"], "sort" if t["length_sort"] else "no sort")
            best = lines[key].get(t["batch_size"])
            lines[key][t["batch_size"]] = t["p95_ms"] if best is None else min(best, t["p95_ms"])
    fig = go.Figure()
    sizes = sorted({x for points in lines.values() for x in points})
    for (threads, precision, sort), points in sorted(lines.items()):
        xs = sorted(points)
        fig.add_trace(go.Scatter(x=xs, y=[points[x] for x in xs], mode="lines+markers",
                                 name=f"threads {threads}, {precision}, {sort}"))
    fig.update_layout(title="p95 per query against batch size (feasible trials)", xaxis_title="batch size",
                      yaxis_title="p95 (ms)", xaxis={"type": "log", "tickvals": sizes})
    return fig


def trial_history(history: list[dict[str, Any]]) -> go.Figure:
    fig = go.Figure()
    groups: dict[str, list[dict[str, Any]]] = {"measured": [], "rejected by parity": [], "pruned": []}
    for t in history:
        if t.get("rejected"):
            groups["rejected by parity"].append(t)
        elif t.get("state") == "pruned":
            groups["pruned"].append(t)
        elif t.get("state") == "complete" and t.get("p95_ms") is not None:
            groups["measured"].append(t)
    symbols = {"measured": "circle", "rejected by parity": "x", "pruned": "triangle-down"}
    for name, trials in groups.items():
        fig.add_trace(go.Scatter(
            x=[t["number"] for t in trials], y=[t.get("p95_ms") or 0 for t in trials], mode="markers", name=name,
            marker={"symbol": symbols[name], "size": 10},
            text=[_label(t) + (f"<br>{html.escape(t['rejected'])}" if t.get("rejected") else "")
                  for t in trials]))
    fig.update_layout(title="Trial history", xaxis_title="trial", yaxis_title="p95 (ms)")
    return fig


def parity_scatter(sample: dict[str, list[float]]) -> go.Figure:
    lo, hi = min(sample["fp32"] + sample["int8"]), max(sample["fp32"] + sample["int8"])
    fig = go.Figure([go.Scatter(x=sample["fp32"], y=sample["int8"], mode="markers", name="pairs",
                                marker={"size": 5, "opacity": 0.6}),
                     go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="y = x", line={"dash": "dash"})])
    fig.update_layout(title="int8 against the fp32 reference (calibrated scores)", xaxis_title="fp32 score",
                      yaxis_title="int8 score")
    return fig


def waterfall(explain: dict[str, Any]) -> go.Figure:
    steps = explain["waterfall"]
    fig = go.Figure(go.Bar(x=["baseline"] + [f"+ {s['knob']}" for s in steps],
                           y=[explain["baseline_p95_ms"]] + [s["p95_ms"] for s in steps],
                           text=["1.00x"] + [f"{c:.2f}x" for c in explain["cumulative"]], textposition="outside"))
    fig.update_layout(title="Waterfall: one knob at a time (p95, cumulative speedup)", yaxis_title="p95 (ms)")
    return fig


def agreement_vs_p95(scope: dict[str, Any]) -> go.Figure:
    """The pool frontier: each scope the gate judged, by how much of fp32's results it keeps and how fast it
    ran (the timed ones); the floor as a line."""
    fig = go.Figure()
    points = scope.get("frontier") or []
    for passed, name in ((True, "passes the gate"), (False, "below the floor")):
        chosen = [p for p in points if bool(p.get("passed")) == passed and p.get("p95_ms") is not None]
        fig.add_trace(go.Scatter(
            x=[p["p95_ms"] for p in chosen], y=[p["agreement"]["mean"] for p in chosen], mode="markers", name=name,
            marker={"size": 11, "symbol": "circle" if passed else "x"},
            text=[html.escape(_scope_label(p)) for p in chosen]))
    floor = (scope.get("gate") or {}).get("min_mean")
    if isinstance(floor, (int, float)):
        fig.add_hline(y=floor, line_dash="dash", annotation_text=f"floor {floor:g}")
    fig.update_layout(title="Result agreement against p95: how much Hindsight scores (pool cap, token cut)",
                      xaxis_title="p95 per recall (ms)", yaxis_title="share of fp32's whole-pool results kept")
    return fig


def _scope_label(point: dict[str, Any]) -> str:
    caps = point.get("max_candidates") or {}
    tokens = point.get("max_tokens_per_candidate")
    return (", ".join(f"{level} pool {cap}" for level, cap in caps.items()) or "whole pool") + (
        f", {tokens} tokens/candidate" if tokens else "")


def _label(config: dict[str, Any]) -> str:
    """A configuration as `run` prints it (every knob that differs from onnxruntime's defaults, fused included)."""
    from autotune.errors import AutotuneError
    from autotune.runtime.engine import EngineConfig

    try:
        return EngineConfig.from_dict(config).label()
    except (KeyError, TypeError, ValueError, AutotuneError):  # a damaged profile still gets a report
        return ", ".join(f"{k}={v}" for k, v in config.items())


def _number(value: Any, spec: str) -> str:
    return format(value, spec) if isinstance(value, (int, float)) else "?"


def render_report(profile: dict[str, Any]) -> str:
    search = profile.get("search", {})
    figures = [p95_vs_batch(search.get("history", [])), trial_history(search.get("history", []))]
    sample = (profile.get("parity") or {}).get("int8_vs_fp32")
    if sample and sample.get("fp32"):
        figures.append(parity_scatter(sample))
    if (profile.get("scope") or {}).get("frontier"):
        figures.append(agreement_vs_p95(profile["scope"]))
    if profile.get("explain"):
        figures.append(waterfall(profile["explain"]))
    parts = [f.to_html(full_html=False, include_plotlyjs="inline" if i == 0 else False, div_id=f"plot{i}")
             for i, f in enumerate(figures)]
    m, c = profile.get("metrics", {}), profile.get("config", {})
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in (profile.get("noise") or {}).get("warnings", []))
    head = (f"<h1>autotune profile {html.escape(str(profile.get('name', '')))}</h1>"
            f"<p>{html.escape(str(profile.get('host', {}).get('brand', '')))}, "
            f"{profile.get('host', {}).get('cores', {}).get('usable', '?')} usable cores, "
            f"model {html.escape(str(profile.get('model', {}).get('name', '')))}</p>"
            f"<p>Chosen: {html.escape(_label(c))}: p95 {_number(m.get('p95_ms'), '.1f')} ms against the "
            f"baseline's {_number(m.get('baseline_p95_ms'), '.1f')} ms "
            f"({_number(m.get('speedup_p95'), '.2f')}x, measured side by side)</p>"
            + (f"<ul class='warn'>{warnings}</ul>" if warnings else ""))
    return ("<!doctype html><html><head><meta charset='utf-8'><title>autotune report</title>"
            "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}.warn{color:#a40}</style></head><body>"
            + head + "".join(parts) + "</body></html>")


def write_report(profile: dict[str, Any], out: Path) -> Path:
    write_atomic(out, render_report(profile))
    return out
