"""The attainable fp32 FLOP/s on this host, measured through onnxruntime itself.

The nominal peak multiplies a clock the VM reports by FMA widths the CPU may not sustain; a
one-thread configuration once reached 93% of it, so it is not the real ceiling. A large square
MatMul run by the same runtime, with the same thread count, is: it is what MLAS's best kernel
reaches on this host, now.
"""

from __future__ import annotations

import functools
import time

import numpy as np

SIZE = 1024  # 2 x 1024^3 FLOPs a run: long enough to time, short enough to repeat
RUNS = 7


@functools.lru_cache(maxsize=8)
def measured_peak(threads: int, size: int = SIZE, runs: int = RUNS) -> float:
    """Best-of-`runs` FLOP/s of a [size, size] x [size, size] MatMul with `threads` intra-op threads."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((size, size), dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "peak",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [size, size])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    x = rng.standard_normal((size, size), dtype=np.float32)
    session.run(None, {"x": x})  # warm-up: thread pool, prepacked weights
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, {"x": x})
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best
