"""Checks made once before the search, so that no trial is spent on a knob that cannot win.

- int8's speed first (`int8_speed`, seconds): where no variant is faster than fp32 beyond the noise, int8 leaves
  the space unjudged, and only the variants that are faster are judged (issue 51). Skipped where the user named
  the precisions: then int8 is judged as asked.
- int8: what it keeps of the results depends on the model, the quantization format and the variant
  (per-token, per-channel or per-tensor scales), and hardly on batch size, threads or sort (see
  `benchmarks/int8_parity.py`). Each variant is judged once, in order (per-token first, in sorted batches
  on every core since its scores do not move with the batch; the dynamic ones at batch size 1), by the
  results (the int8 tolerance: the top 10 kept, above a score floor); the first that passes is the `int8`
  the search runs; where none does and the time plan leaves room, the most sensitive MatMuls go back to
  fp32 until one does (`int8_judge`), and only if none then passes does `int8` leave the space, with every
  variant's figures.
  A finalist in int8 is checked again on the full workload, as every finalist is.
- the fused graph: made once; when attention does not fuse, `fused` leaves the space.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from autotune.errors import ModelError, OptionsError
from autotune.gates.int8_judge import Int8Verdict, judge_int8
from autotune.gates.int8_speed import WORTH, SpeedMemory, int8_speed
from autotune.gates.parity import Tolerance
from autotune.runtime.engine import REFERENCE, ScoringPool, onnx_pool
from autotune.runtime.quantize import int8_format
from autotune.runtime.space import SearchSpace
from autotune.workload.queries import Workload


@dataclass(frozen=True)
class Dropped:
    knob: str
    value: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"knob": self.knob, "value": self.value, "reason": self.reason}

    def line(self) -> str:
        return f"{self.knob}={self.value} left out of the search: {self.reason}"


NO_GRAPH = "this target does not run an ONNX graph"


def _without_int8(space: SearchSpace) -> SearchSpace:
    return space.narrowed(precisions=tuple(p for p in space.precisions if p != "int8"))


def fused_graph(pool: ScoringPool) -> str | None:
    """None when the fused graph exists (made now if need be), else why it cannot be made."""
    from autotune.runtime.fusion import FusionUnavailable

    if onnx_pool(pool) is None:
        return NO_GRAPH
    try:
        pool.model_path(replace(REFERENCE, graph="fused"))
    except (FusionUnavailable, ModelError) as exc:
        return str(exc)
    return None


def prechecked(space: SearchSpace, pool: ScoringPool, workload: Workload, reference: list[np.ndarray],
               int8_tolerance: Tolerance, *, has_vnni: bool = True, int8_fallback: bool = True,
               speed_first: bool = False, until: float | None = None, memory: SpeedMemory | None = None
               ) -> tuple[SearchSpace, list[Dropped], Int8Verdict | None]:
    """The space without the knob values that cannot win, why each went, and how int8 was judged. With
    `speed_first`, int8's speed is measured before its results are judged, and a slow int8 is not judged;
    `memory` keeps that verdict for the next run, and for the other hosts sharing the study."""
    dropped: list[Dropped] = []
    verdict = None
    onnx = onnx_pool(pool)
    if "int8" in space.precisions and onnx is None:
        dropped.append(Dropped("precision", "int8", NO_GRAPH))
        space = _without_int8(space)
    if "fused" in space.graphs:
        reason = fused_graph(pool)
        if reason is not None:
            dropped.append(Dropped("graph", "fused", reason))
            space = space.narrowed(graphs=tuple(g for g in space.graphs if g != "fused"))
    if onnx is not None and "int8" in space.precisions and speed_first and "fp32" in space.precisions:
        speed = None if memory is None else memory.recall()
        if speed is None:
            speed = int8_speed(onnx, workload, host=f"{'avx512_vnni' if has_vnni else 'no VNNI'}, "
                                                    f"{int8_format(has_vnni)}")
            if memory is not None:
                speed = memory.keep(speed)
        if not speed.worth_judging():  # its verdict is the speed alone: no variant was judged
            dropped.append(Dropped("precision", "int8", f"not faster than fp32 on this host ({speed.best():.2f}x "
                                                        f"at best, needs {WORTH:.2f}x): not judged"))
            return (_without_int8(space), dropped,
                    Int8Verdict((), None, speed.seconds, speed=speed))
    else:
        speed = None
    if onnx is not None and "int8" in space.precisions:
        verdict = judge_int8(onnx, workload, reference, int8_tolerance, has_vnni=has_vnni, fallback=int8_fallback,
                             speed=speed, until=until)
        if verdict.chosen is None:
            reason = verdict.reason()
            dropped.append(Dropped("precision", "int8", f"no variant keeps the results at batch size 1: {reason}"))
            space = _without_int8(space)
            if not space.precisions:
                raise OptionsError(f"int8 fails parity on this model and workload ({reason}), and --precisions "
                                   "left nothing else to search: add fp32")
    return space, dropped, verdict

