"""What else the host was doing while we measured: load average and CPU steal, sampled in the background.

A profile measured while the load exceeded the usable cores, or while the hypervisor stole
time, says so and is marked untrustworthy; `--wait-quiet` waits (bounded) for a quiet host.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

STEAL_WARN = 0.05  # 5% of CPU time stolen by the hypervisor


def load1() -> float | None:
    with contextlib.suppress(OSError):
        return os.getloadavg()[0]
    return None


@dataclass(frozen=True)
class NoiseSample:
    load_max: float | None = None
    steal_fraction: float | None = None
    samples: int = 0
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"load_max": None if self.load_max is None else round(self.load_max, 2),
                "steal_fraction": None if self.steal_fraction is None else round(self.steal_fraction, 4),
                "samples": self.samples}


class LoadMonitor:
    """Samples load1 every `interval` seconds and CPU steal over the whole window."""

    def __init__(self, usable_cores: int, *, interval: float = 1.0) -> None:
        self.usable_cores = usable_cores
        self.interval = interval
        self._stop = threading.Event()
        self._loads: list[float] = []
        self._thread = threading.Thread(target=self._run, name="autotune-load-monitor", daemon=True)
        self._start_times: Any = None  # psutil's named tuple of the platform's CPU times

    def __enter__(self) -> LoadMonitor:
        self._start_times = psutil.cpu_times()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            value = load1()
            if value is not None:
                self._loads.append(value)
            if self._stop.wait(self.interval):
                return

    def result(self) -> NoiseSample:
        load_max = max(self._loads) if self._loads else None
        steal = None
        start, end = self._start_times, psutil.cpu_times()
        if start is not None and hasattr(end, "steal"):
            total = sum(end) - sum(start)
            if total > 0:
                steal = max(0.0, (end.steal - start.steal) / total)
        warnings = []
        if load_max is not None and load_max > self.usable_cores:
            warnings.append(f"the load average reached {load_max:.1f} on {self.usable_cores} usable cores while "
                            "measuring: these figures are not trustworthy; rerun on a quiet host (or with "
                            "--wait-quiet)")
        if steal is not None and steal > STEAL_WARN:
            warnings.append(f"the hypervisor stole {steal:.0%} of CPU time while measuring: these figures are not "
                            "trustworthy")
        return NoiseSample(load_max, steal, len(self._loads), warnings)


def wait_quiet(usable_cores: int, timeout_s: float, *, threshold: float = 0.75,
               on_wait: Callable[[float], None] | None = None, sleep: Callable[[float], None] = time.sleep,
               read_load: Callable[[], float | None] = load1) -> bool:
    """Wait until load1 falls to `threshold` x the usable cores, for at most `timeout_s`. True if it did."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = read_load()
        if value is None or value <= threshold * usable_cores:
            return True
        if time.monotonic() >= deadline:
            return False
        if on_wait is not None:
            on_wait(value)
        sleep(min(5.0, max(0.0, deadline - time.monotonic())))


@dataclass(frozen=True)
class Conditions:
    """What else the host was doing while the run measured, and whether its figures can be trusted."""

    host: dict[str, Any]  # `host.run_conditions()`: load average, CPU governor and clock
    sample: NoiseSample  # the load and steal sampled over the measuring
    trustworthy: bool | str  # "unknown" with one final round
    note: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {**self.host, **self.sample.to_dict(), "trustworthy": self.trustworthy,
                **({} if self.note is None else {"note": self.note})}


def trustworthiness(warnings: list[str], final_rounds: int) -> bool | str:
    """True, False, or "unknown" when one final round gives no spread to judge."""
    if warnings:
        return False
    return "unknown" if final_rounds < 2 else True
