from __future__ import annotations

from autotune.measure.noise import LoadMonitor, trustworthiness, wait_quiet


def test_a_load_above_the_cores_makes_the_figures_untrustworthy(monkeypatch):
    monkeypatch.setattr("autotune.measure.noise.load1", lambda: 212.0)
    with LoadMonitor(2, interval=0.01) as monitor:
        pass
    sample = monitor.result()
    assert sample.load_max == 212.0 and sample.samples >= 1
    assert any("212.0 on 2 usable cores" in w and "not trustworthy" in w for w in sample.warnings)
    assert trustworthiness(sample.warnings, final_rounds=3) is False


def test_a_quiet_host_gives_no_warning(monkeypatch):
    monkeypatch.setattr("autotune.measure.noise.load1", lambda: 0.3)
    with LoadMonitor(2, interval=0.01) as monitor:
        pass
    assert not [w for w in monitor.result().warnings if "load average" in w]


def test_one_final_round_is_unknown_not_trustworthy():
    assert trustworthiness([], final_rounds=1) == "unknown"
    assert trustworthiness([], final_rounds=2) is True


def test_wait_quiet_waits_for_the_load_to_fall_and_is_bounded():
    loads = iter([5.0, 4.0, 1.0])
    waited: list[float] = []
    assert wait_quiet(2, 60, read_load=lambda: next(loads), sleep=lambda s: None, on_wait=waited.append)
    assert waited == [5.0, 4.0]
    assert not wait_quiet(2, 0.0, read_load=lambda: 9.0, sleep=lambda s: None)
