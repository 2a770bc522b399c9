"""A long-context reranker end to end: peak RSS of `autotune run`, and of `autotune serve` under a big request.

It builds a random-weight ModernBERT cross-encoder (8192 positions, alternating global and local
attention, no token_type_ids) with transformers, exports it with torch's ONNX exporter, and
writes a 6-query workload where one document is about 2,100 tokens. Then:
1. `autotune run --model DIR` with default settings (truncation at 512, as Hindsight's onnx
   provider), and again with `--max-tokens 8192`: each run's peak RSS, the process and its
   children (the kernel's high-water marks), against the 4 GB the issue allows;
2. `autotune serve` on the model (TEI's token budget, 16384 by default) answering one request of
   300 long documents: the server's peak RSS against the estimate for its largest batch under
   that budget.
Needs the torch extra. Usage: python benchmarks/long_context.py [--skip-serve]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORDS = [f"w{i}" for i in range(2000)]
RUN_AND_REPORT = ("import resource, sys; from autotune.cli import main; rc = main(sys.argv[1:]); "
                  "peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
                  "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
                  "print(f'PEAK_KB {peak}', file=sys.stderr); sys.exit(rc)")


def build_model(directory: Path) -> None:
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(special + WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    directory.mkdir(parents=True)
    tok.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 8192, "pad_token": "[PAD]",
        "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
        "model_input_names": ["input_ids", "attention_mask"]}))
    config = transformers.ModernBertConfig(
        vocab_size=len(special) + len(WORDS), hidden_size=384, intermediate_size=768, num_hidden_layers=8,
        num_attention_heads=6, max_position_embeddings=8192, global_attn_every_n_layers=2, local_attention=128,
        num_labels=1, pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.ModernBertForSequenceClassification(config).eval()
    sample = (torch.ones((2, 16), dtype=torch.long), torch.ones((2, 16), dtype=torch.long))
    names = ["input_ids", "attention_mask"]
    torch.onnx.export(model, sample, str(directory / "model.onnx"), input_names=names, output_names=["logits"],
                      dynamic_axes={**{n: {0: "batch", 1: "sequence"} for n in names}, "logits": {0: "batch"}},
                      opset_version=17, dynamo=False)
    (directory / "config.json").write_text(json.dumps({**config.to_dict(), "model_type": "modernbert"}))


def doc(rng: object, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))  # type: ignore[attr-defined]


def write_workload(path: Path) -> None:
    import random

    rng = random.Random(7)
    lines = []
    for i in range(6):
        docs = [doc(rng, rng.randint(10, 120)) for _ in range(rng.randint(10, 40))]
        if i == 2:
            docs[0] = doc(rng, 2100)
        lines.append(json.dumps({"id": f"q{i}", "query": doc(rng, 8), "documents": docs}))
    path.write_text("\n".join(lines) + "\n")


def run(work: Path, model: Path, workload: Path, *extra: str) -> tuple[int, float, str]:
    env = {**os.environ, "AUTOTUNE_STATE_DIR": str(work / "state")}
    proc = subprocess.run([sys.executable, "-c", RUN_AND_REPORT, "run", "--workload", str(workload), "--model",
                           str(model), "--no-compose", "--env-file", str(work / ".env"), "--profile-dir",
                           str(work / "profiles"), "--model-out", str(work / "out"), "--name", "long", "--fresh",
                           *extra], capture_output=True, text=True, cwd=work, env=env)
    peak_kb = next((int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("PEAK_KB")), 0)
    chosen = next((line for line in proc.stdout.splitlines() if line.startswith("Chosen")), proc.stderr[-400:])
    # ru_maxrss is reset with the kernel's mark by each trial's measurement: the run's own figure (the
    # "memory:" line, its peak across every reset) is the whole run's
    tuner = next((float(line.split("peaked at ")[1].split(" MB")[0]) for line in proc.stdout.splitlines()
                  if line.startswith("memory:") and "peaked at " in line), 0.0)
    return proc.returncode, max(peak_kb / 1024, tuner), chosen


def serve_peak(work: Path, model: Path) -> None:
    import httpx

    from autotune.measure.memory import ModelMemory
    from autotune.runtime.model import load_model_dir
    from autotune.runtime.tokenize import PairTokenizer
    from autotune.search.objective import batch_shapes

    env = {**os.environ, "AUTOTUNE_BATCH_SIZE": "32", "AUTOTUNE_INTRA_OP_THREADS": "0", "AUTOTUNE_LENGTH_SORT": "true",
           "AUTOTUNE_PRECISION": "fp32", "AUTOTUNE_MODEL": str(model)}
    server = subprocess.Popen([sys.executable, "-m", "autotune", "serve", "--port", "18089"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get("http://127.0.0.1:18089/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.5)
        process = psutil.Process(server.pid)
        base = process.memory_info().rss / 2**20
        budget = httpx.get("http://127.0.0.1:18089/info").json()["max_batch_tokens"]
        import random

        rng = random.Random(3)
        texts = [doc(rng, rng.randint(400, 1500)) for _ in range(300)]
        peak = [base]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.02):
                peak[0] = max(peak[0], process.memory_info().rss / 2**20)

        threading.Thread(target=sample, daemon=True).start()
        started = time.monotonic()
        answer = httpx.post("http://127.0.0.1:18089/rerank", json={"query": doc(rng, 8), "texts": texts},
                            timeout=3600)
        done.set()
        bundle = load_model_dir(model)
        memory = ModelMemory.from_config(bundle.config, bundle.onnx_path.stat().st_size)
        lengths = [len(e.ids) for e in PairTokenizer(bundle.tokenizer_path, 8192).encode("q " * 8, texts)]
        largest = max(memory.batch_mb(*s) for s in batch_shapes(lengths, 32, True, budget))
        print(f"serve: 300 texts of 400-1500 words, status {answer.status_code} in {time.monotonic() - started:.0f} s; "
              f"token budget {budget}; RSS before {base:.0f} MB, peak {peak[0]:.0f} MB; growth {peak[0] - base:.0f} MB "
              f"against the largest batch's estimate {largest:.0f} MB ({(peak[0] - base) / largest:.2f}x)")
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-serve", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = work / "modernbert"
        build_model(model)
        workload = work / "queries.jsonl"
        write_workload(workload)
        for label, extra in (("default settings", ()), ("--max-tokens 8192", ("--max-tokens", "8192"))):
            rc, peak_mb, chosen = run(work, model, workload, *extra)
            print(f"run, {label}: exit {rc}, peak RSS {peak_mb:.0f} MB (limit 4096 MB). {chosen.strip()}")
        if not args.skip_serve:
            serve_peak(work, model)


if __name__ == "__main__":
    main()
