"""Issue 35, item 2: a rerun keeps the committed pick unless a challenger beats it beyond the noise."""

from __future__ import annotations

import io

import pytest
import yaml

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.measure.stats import Latency
from autotune.runtime.engine import EngineConfig
from autotune.search.finalists import Finalist, challenge

HELD, OTHER = EngineConfig(4, 2, True, "fp32"), EngineConfig(2, 2, True, "fp32")


def _finalist(config: EngineConfig, rounds: list[float]) -> Finalist:
    p95 = sorted(rounds)[len(rounds) // 2]
    return Finalist(config, Latency(p95 * 0.8, p95, p95), rounds, None)


@pytest.mark.parametrize(("held", "other", "kept"), [
    ([100, 102, 98], [95, 97, 96], True),     # 5% faster: within the 10% noise floor
    ([100, 101, 99], [80, 120, 70], True),    # faster at p95 but not in every round
    ([100, 102, 98], [70, 72, 71], False),    # 40% faster in every round: beyond the noise
    ([100, 160, 60], [70, 72, 71], True),     # the committed pick's own rounds spread wider than the gain
])
def test_the_committed_pick_stays_unless_beaten_beyond_the_noise(held, other, kept):
    incumbent, challenger = _finalist(HELD, held), _finalist(OTHER, other)
    winner, line = challenge(incumbent, challenger)
    assert (winner is incumbent) is kept
    assert line.startswith("kept the committed pick") is kept


def test_a_rerun_races_the_committed_pick_and_says_what_it_did(tmp_path, tiny_model_dir, workload_file):
    args = ["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), "--env-file",
            str(tmp_path / ".env"), "--profile-dir", str(tmp_path / "p"), "--name", "n", "--trials", "4",
            "--repeats", "1", "--final-rounds", "2", "--refine-rounds", "0"]
    assert main(args, stdout=io.StringIO(), stderr=io.StringIO()) == ExitStatus.OK
    first = yaml.safe_load((tmp_path / "p" / "n.yaml").read_text())["config"]
    out = io.StringIO()
    assert main(args, stdout=out, stderr=io.StringIO()) == ExitStatus.OK
    second = yaml.safe_load((tmp_path / "p" / "n.yaml").read_text())["config"]
    rerun = next(line for line in out.getvalue().splitlines() if line.startswith("rerun: "))
    assert (second == first) == ("replaced" not in rerun), rerun
    fresh = io.StringIO()
    assert main([*args, "--fresh"], stdout=fresh, stderr=io.StringIO()) == ExitStatus.OK
    assert "rerun: " not in fresh.getvalue()


def test_an_unreadable_committed_profile_is_replaced_not_raced(tmp_path, tiny_model_dir, workload_file):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "n.yaml").write_text("# autotune profile\nschema: [unclosed\n")
    err = io.StringIO()
    status = main(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), "--env-file",
                   str(tmp_path / ".env"), "--profile-dir", str(tmp_path / "p"), "--name", "n", "--trials", "2",
                   "--repeats", "1", "--final-rounds", "1", "--refine-rounds", "0"], stdout=io.StringIO(), stderr=err)
    assert status == ExitStatus.OK and "cannot be read" in err.getvalue(), err.getvalue()
    assert yaml.safe_load((tmp_path / "p" / "n.yaml").read_text())["name"] == "n"
