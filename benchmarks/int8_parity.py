"""Does int8 parity depend on batch size or sort? (It decides whether one pre-check is enough.)

Dynamic quantization scales each activation tensor by its own range, and a batch's tensor
holds every row of it (padding included), so in principle the batch's make-up can move an
int8 score. This prints int8's parity figures against the fp32 reference for each batch size,
sort on and off, on each workload, and whether the pass/fail verdict ever differs from the
pre-check's (batch size 1, no sort). Usage: python benchmarks/int8_parity.py [--workloads ...]
"""

from __future__ import annotations

import argparse

from _common import WORKLOADS

from autotune.gates.parity import INT8_TOLERANCE, compare, reference_scores
from autotune.host import default_probe
from autotune.measure.timing import replay
from autotune.runtime.engine import EngineConfig
from autotune.runtime.model import build_default_model
from autotune.runtime.quantize import int8_format
from autotune.runtime.targets import get_target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workloads", default="example,longtail")
    parser.add_argument("--batch-sizes", default="1,2,4,8,16,32")
    args = parser.parse_args()
    host = default_probe().probe()
    bundle = build_default_model()
    pool = get_target("onnx").pool(bundle, has_vnni=host.has_vnni, usable_cores=host.cores.usable)
    print(f"host: {host.brand}, vnni={host.has_vnni}, int8 format {int8_format(host.has_vnni)}")
    for name in args.workloads.split(","):
        workload = WORKLOADS[name]()
        reference = reference_scores(pool, workload, host.onnxruntime)
        verdicts = []
        print(f"\n[{name}]  bs  sort  spearman  max|d|   top-k  passes")
        for sort in (False, True):
            for bs in (int(b) for b in args.batch_sizes.split(",")):
                config = EngineConfig(bs, 0, sort, "int8")
                scores = replay(pool.engine(config), workload.queries, keep_scores=True).scores
                report = compare(reference, scores, INT8_TOLERANCE)
                verdicts.append(report.passed)
                print(f"{'':>{len(name) + 3}}{bs:>4}  {'on' if sort else 'off':>4}  {report.spearman:8.4f}  "
                      f"{report.max_abs:.4f}  {report.topk:5.2f}  {report.passed}")
        same = len(set(verdicts)) == 1
        print(f"  verdict {'the same at every batch size and sort' if same else 'DEPENDS on batch size or sort'}")


if __name__ == "__main__":
    main()
