"""The run's summary lines that judge memory: what the profile promises under load, and the cut that keeps it."""

from __future__ import annotations

from autotune.analysis.summary import burst_line

BURST = {"workers": 2, "rows": 2, "max_input_length": 2541, "model_max_length": 8192, "base_mb": 83.0,
         "peak_mb": 1439.0, "added_mb": 1356.0, "estimated_mb": 1310.0, "within_budget": True, "measured": True}


def test_a_cut_burst_names_the_cut_and_the_budget():
    line = burst_line(BURST, 2048.0)
    assert line == ("under load: 2 worker(s) at once on the longest input (2541 tokens, 2 per batch) add 1356 MB, "
                    "1439 MB in all; inputs are cut to 2541 tokens (the model takes 8192) so that it fits the "
                    "2048 MB budget")


def test_an_uncut_burst_says_nothing_of_a_cut():
    line = burst_line({**BURST, "max_input_length": 8192}, 2048.0)
    assert "cut" not in line and "past" not in line


def test_a_burst_over_the_budget_or_not_run_says_so():
    over = burst_line({**BURST, "within_budget": False, "measured": False}, 1024.0)
    assert "past the 1024 MB budget" in over and "estimated; not run" in over


def test_rejections_are_headed_by_what_rejected_them():
    """Issue 50, item 11: memory-estimate refusals were headed "Rejected by the parity gate"."""
    from autotune.analysis.summary import rejected_lines
    from autotune.runtime.engine import EngineConfig
    from autotune.search.study import TrialRecord

    config = EngineConfig(batch_size=4, intra_op_threads=1, length_sort=True, precision="fp32")
    records = [TrialRecord(1, config, "complete", 10.0, "Spearman 0.9 < 0.99", cause="parity"),
               TrialRecord(2, config, "complete", None, "estimated 900 MB would pass", cause="memory"),
               TrialRecord(3, config, "complete", None, "estimated 950 MB would pass", cause="memory")]
    lines = rejected_lines(records)
    assert "Rejected by the parity gate (1):" in lines and "Rejected by the memory budget (2):" in lines
    parity_at = lines.index("Rejected by the parity gate (1):")
    assert lines[parity_at + 1].startswith("  #1 ")
