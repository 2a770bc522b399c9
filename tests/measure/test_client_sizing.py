from __future__ import annotations

from autotune.measure.client_sizing import (
    HTTP_TIMEOUT_KEY,
    MAX_CONCURRENT_KEY,
    ClientSizing,
    hindsight_concurrency,
    largest_request,
)
from autotune.workload.queries import Query, Workload


def sizing(p99: float, workers: int = 1) -> ClientSizing:
    return ClientSizing(workers=workers, service_p99_s=p99, largest_candidates=300, concurrency=8)


def test_one_permit_per_worker_and_a_time_out_that_covers_the_slowest_request():
    assert sizing(2.0, workers=2).keys() == {MAX_CONCURRENT_KEY: "2", HTTP_TIMEOUT_KEY: "30"}  # never below 30
    assert sizing(20.0).keys()[HTTP_TIMEOUT_KEY] == "45"  # 2 x 20 s + 5 s
    assert sizing(20.0).timeout_for(8) == 160.0  # eight in flight on one worker: the last waits for seven


def test_the_users_own_values_are_judged_and_named_without_their_values():
    assert sizing(2.0).unsafe({}) is None
    assert sizing(2.0).unsafe({MAX_CONCURRENT_KEY: "4"}) is None  # 4 x 2 s fits in our 30 s
    line = sizing(5.0).unsafe({MAX_CONCURRENT_KEY: "8", HTTP_TIMEOUT_KEY: "17"})
    assert line is not None and MAX_CONCURRENT_KEY in line and HTTP_TIMEOUT_KEY in line
    assert "17" not in line and "\n" not in line
    assert sizing(5.0).unsafe({HTTP_TIMEOUT_KEY: "4"}) is not None  # below one request's own service time


def test_hindsight_concurrency_is_the_users_value_else_its_default():
    assert hindsight_concurrency({}) == 8
    assert hindsight_concurrency({MAX_CONCURRENT_KEY: "3"}) == 3
    assert hindsight_concurrency({MAX_CONCURRENT_KEY: ""}) == 8


def test_the_largest_request_is_cut_to_the_users_candidate_caps():
    queries = [Query("a", ["x"] * 10), Query("b", ["y"] * 400)]
    workload = Workload(queries=queries, sha256="0" * 64)
    assert len(largest_request(workload, {}).documents) == 400
    cut = largest_request(workload, {"HINDSIGHT_API_RERANKER_MAX_CANDIDATES_HIGH": "250"})
    assert len(cut.documents) == 250 and cut.query == "b"


def test_run_names_the_users_unsafe_time_out_once_without_its_value(tmp_path, tiny_model_dir, workload_file):
    from autotune.errors import ExitStatus
    from autotune.outputs.envfile import managed_values
    from tests.support.cli import run_cli

    env = tmp_path / ".env"
    env.write_text(f"{HTTP_TIMEOUT_KEY}=0.000001\n")  # 1 µs: below any service time, on any host
    status, out, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir),
                                "--target", "tei", "--trials", "3", "--repeats", "1", "--final-rounds", "2",
                                "--refine-rounds", "0", "--env-file", str(env), "--profile-dir",
                                str(tmp_path / "p"), "--no-compose"])
    assert status == ExitStatus.OK, err
    lines = [ln for ln in (out + err).splitlines() if "unsafe" in ln]
    assert len(lines) == 1 and HTTP_TIMEOUT_KEY in lines[0] and "0.000001" not in out + err
    assert env.read_text().startswith(f"{HTTP_TIMEOUT_KEY}=0.000001\n")  # the user's value wins
    assert HTTP_TIMEOUT_KEY not in managed_values(env) and MAX_CONCURRENT_KEY in managed_values(env)
