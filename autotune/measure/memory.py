"""Memory: each trial's measured peak, the budget it must fit, and an estimate made before running.

The peak is the kernel's own high-water mark (`VmHWM`), reset before each measurement through
`/proc/self/clear_refs`, so a spike between two samples is never missed. Where that file
cannot be written, a psutil sampling thread stands in (and may miss a short spike).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil

DEFAULT_FRACTION = 0.5  # of the memory available when the run starts
DEFAULT_CAP_MB = 2048.0  # and never more by default: the tuner is a guest on a Hindsight host of 4-8 GB
ESTIMATE_MARGIN = 1.5  # a configuration is run only if this much over its estimate fits: the estimate's
# worst measured under-estimate was 1.45x (benchmarks/run_memory.py, arena on and off, batch 1 to 100)
MIN_CALIBRATION_MB = 32.0  # below this, one measured batch is mostly noise
MAX_ACTIVATION_SCALE = 16.0
LARGE_WEIGHTS_MB = 512.0  # from here on a session's measured size is mostly weights (`calibrated`)
MIN_WEIGHTS_FACTOR = 1.0  # never count fewer than one copy, whatever one measurement says
RUNTIME_MB = 20.0  # an ORT session's own buffers and thread pool, beyond weights and activations
MB = 2**20
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kb(field: str) -> int | None:
    try:
        found = re.search(rf"^{field}:\s+(\d+) kB", _STATUS.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(found.group(1)) if found else None


_highest_mb = 0.0  # the process's peak across resets: each reset folds the peak it erases in here


def _reset_peak() -> bool:
    global _highest_mb
    _highest_mb = max(_highest_mb, (_status_kb("VmHWM") or 0) / 1024)
    try:
        _CLEAR_REFS.write_text("5")  # "5": reset the peak RSS to the current RSS (Linux >= 4.0)
    except OSError:
        return False
    return True


def process_peak_mb() -> float:
    """This process's peak RSS over its whole life, although per-trial measurements reset the kernel's
    mark (and with it `getrusage`'s `ru_maxrss`)."""
    return max(_highest_mb, (_status_kb("VmHWM") or 0) / 1024, rss_mb())


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / MB


class PeakRss:
    """`with PeakRss() as peak: ...`, then `peak.growth_mb`: the peak RSS above the RSS at entry."""

    def __init__(self, interval_s: float = 0.005) -> None:
        self.interval_s = interval_s
        self.start_mb = 0.0
        self.peak_mb = 0.0
        self.exact = False
        self.samples = 0  # how often the sampler has looked (a test can wait for it rather than for a clock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> PeakRss:
        self.start_mb = rss_mb()
        self.peak_mb = self.start_mb
        self.exact = _reset_peak() and _status_kb("VmHWM") is not None
        if not self.exact:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        process = psutil.Process()
        while not self._stop.wait(self.interval_s):
            self.peak_mb = max(self.peak_mb, process.memory_info().rss / MB)
            self.samples += 1

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.exact:
            self.peak_mb = max(self.start_mb, (_status_kb("VmHWM") or 0) / 1024)
        else:
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
            self.peak_mb = max(self.peak_mb, rss_mb())

    @property
    def growth_mb(self) -> float:
        return max(0.0, self.peak_mb - self.start_mb)


def cgroup_memory_limit(read: Any = None) -> int | None:
    """Bytes the cgroup allows (v2 memory.max, else v1), or None when unlimited."""
    def default_read(path: str) -> str | None:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return None

    read = read or default_read
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        value = read(path)
        if value and value.isdigit() and int(value) < 2**60:
            return int(value)
    return None


def available_mb() -> float:
    """What this process could still take: the memory available, within the cgroup's limit."""
    available = psutil.virtual_memory().available
    limit = cgroup_memory_limit()
    if limit is not None:
        available = min(available, max(0, limit - psutil.Process().memory_info().rss))
    return available / MB


def default_budget_mb(fraction: float = DEFAULT_FRACTION, cap_mb: float = DEFAULT_CAP_MB) -> float:
    """The tuner's peak RSS by default: its RSS now plus a fraction of what is available (within the
    cgroup's limit), at most `cap_mb` in all. It must never be what wakes the OOM killer."""
    return min(rss_mb() + fraction * available_mb(), cap_mb)


@dataclass(frozen=True)
class ModelMemory:
    """What a session needs: its weights, and activations that grow with rows and their length."""

    weights_mb: float
    layers: int
    heads: int
    hidden: int
    intermediate: int
    activation_scale: float = 1.0  # measured over estimated activations on the longest pair (`calibrated`)
    weights_factor: float = 2.0  # copies of the weights a session holds (`session_mb`); measured on large models

    @classmethod
    def from_config(cls, config: dict[str, Any], weights_bytes: int) -> ModelMemory | None:
        try:
            return cls(weights_bytes / MB, int(config["num_hidden_layers"]), int(config["num_attention_heads"]),
                       int(config["hidden_size"]), int(config["intermediate_size"]))
        except (KeyError, TypeError, ValueError):
            return None

    def batch_mb(self, rows: int, longest: int) -> float:
        """One batch's live activations in fp32: attention scores and probabilities for one layer at a
        time (ORT frees a layer's buffers before the next), plus the hidden and intermediate states."""
        attention = 2 * rows * self.heads * longest * longest
        states = rows * longest * (4 * self.hidden + 2 * self.intermediate)
        return self.activation_scale * 4 * (attention + states) / MB

    def calibrated(self, measured_session_mb: float, longest: int) -> ModelMemory:
        """This model with its activations scaled to one measured session at one row of `longest` tokens.

        The formula counts BERT's buffers; other families hold more (a ModernBERT export with 8192
        positions took three times as much on a 2,100-token pair: its masks and rotary buffers are L x L
        too). Only ever scaled up, and only where the activations are large enough to measure.

        A large model's session is mostly its weights, and there the measurement sets how many copies it
        holds: a 2.2 GB graph with external data held 0.9 of its weights, not 2 (onnxruntime maps the data file
        and keeps MLAS's prepacked copy alone), and counting 2 refused every configuration of it (issue 52). Only
        ever lowered to 1 copy, and only where the weights dwarf everything else measured."""
        model = self
        if self.weights_mb >= LARGE_WEIGHTS_MB:
            copies = (measured_session_mb - RUNTIME_MB - self.batch_mb(1, longest)) / self.weights_mb
            model = replace(self, weights_factor=min(max(copies, MIN_WEIGHTS_FACTOR), self.weights_factor))
        estimated = model.batch_mb(1, longest)
        if estimated < MIN_CALIBRATION_MB:
            return model
        scale = (measured_session_mb - model.resident_mb() - RUNTIME_MB) / estimated * model.activation_scale
        return replace(model, activation_scale=min(max(scale, model.activation_scale), MAX_ACTIVATION_SCALE))

    def resident_mb(self) -> float:
        """The weights as a session holds them."""
        return self.weights_factor * self.weights_mb

    def session_mb(self, rows: int, longest: int) -> float:
        """A session holds its weights twice (the initializers, and MLAS's prepacked copy for GEMM; fewer where a
        large model's were measured), a small fixed runtime, and one batch's activations. Calibrated on the
        embedded default: within about 30% of the measured peak from batch 1 to 100 (benchmarks/run_memory.py,
        part 1)."""
        return self.resident_mb() + RUNTIME_MB + self.batch_mb(rows, longest)
