"""TEI's HTTP API as `serve` answers it: `/rerank`, `/info`, `/health`, `/metrics`, their errors and their guards."""

from __future__ import annotations

import asyncio
import json

import httpx
import numpy as np
import pytest

from autotune.runtime.model import load_model_dir
from autotune.runtime.sessions import EnginePool
from autotune.serve.routes import create_app
from autotune.serve.service import RerankService
from autotune.serve.settings import ServeSettings, resolve_settings
from autotune.workload.queries import load_workload
from tests.support.corpus import DOCS
from tests.support.http import LiveServer
from tests.support.serving import CONFIG, JSON, in_process, make_service


def test_rerank_matches_in_process_engine_and_is_sorted(server, tiny_model_dir):
    resp = httpx.post(server.url + "/rerank", json={"query": "capital of France?", "texts": DOCS,
                                                    "return_text": False, "unknown_field": 1})
    assert resp.status_code == 200
    ranks = resp.json()
    assert [r["score"] for r in ranks] == sorted((r["score"] for r in ranks), reverse=True)
    assert all("text" not in r for r in ranks)
    expected = in_process(tiny_model_dir, "capital of France?", DOCS).scores
    got = np.empty(len(DOCS))
    for r in ranks:
        got[r["index"]] = r["score"]
    assert np.abs(got - expected).max() <= 1e-6


def test_raw_scores_and_return_text(server, tiny_model_dir):
    resp = httpx.post(server.url + "/rerank", json={"query": "q", "texts": DOCS[:3], "raw_scores": True,
                                                    "return_text": True})
    ranks = resp.json()
    expected = in_process(tiny_model_dir, "q", DOCS[:3]).raw
    for r in ranks:
        assert r["text"] == DOCS[r["index"]]
        assert r["score"] == pytest.approx(expected[r["index"]], abs=1e-6)


@pytest.mark.parametrize(("body", "status", "error_type"), [
    ({"query": "q", "texts": []}, 400, "Empty"),
    ({"query": "q", "texts": ["t"] * 65}, 422, "Validation"),
    ({"texts": ["t"]}, 422, "Validation"),
    ({"query": "q", "texts": [1, 2]}, 422, "Validation"),
    ({"query": "q", "texts": ["t"], "truncation_direction": "Up"}, 422, "Validation"),
    ({"query": "q", "texts": ["word " * 400], "truncate": False}, 422, "Validation"),  # TEI 1.9 (PR #818)
])
def test_bad_requests_get_tei_errors(server, body, status, error_type):
    resp = httpx.post(server.url + "/rerank", json=body)
    assert resp.status_code == status
    assert resp.json()["error_type"] == error_type
    assert httpx.get(server.url + "/health").status_code == 200


def test_malformed_json_and_oversized_body(server):
    resp = httpx.post(server.url + "/rerank", content=b"{nope", headers={"content-type": "application/json"})
    assert resp.status_code == 400 and resp.json()["error_type"] == "Validation"
    big = json.dumps({"query": "q", "texts": ["x" * (9 * 1024 * 1024)]})
    assert httpx.post(server.url + "/rerank", content=big, headers=JSON).status_code == 413
    assert httpx.get(server.url + "/health").status_code == 200


def test_truncation_direction_changes_long_inputs_only(server):
    long_doc = "alpha " * 300 + "omega " * 300
    right = httpx.post(server.url + "/rerank", json={"query": "q", "texts": [long_doc, "short"]}).json()
    left = httpx.post(server.url + "/rerank", json={"query": "q", "texts": [long_doc, "short"],
                                                   "truncation_direction": "Left"}).json()
    by_index = {r["index"]: r["score"] for r in right}, {r["index"]: r["score"] for r in left}
    assert by_index[0][1] == pytest.approx(by_index[1][1], abs=1e-6)
    assert by_index[0][0] != pytest.approx(by_index[1][0], abs=1e-6)


def test_info_health_metrics(server):
    info = httpx.get(server.url + "/info").json()
    for key in ("model_id", "model_sha", "model_dtype", "served_model_name", "max_concurrent_requests",
                "max_input_length", "max_batch_tokens", "max_client_batch_size", "auto_truncate",
                "tokenization_workers", "version"):
        assert key in info
    assert info["model_dtype"] == "float32"
    assert info["model_type"] == {"reranker": {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}}
    httpx.post(server.url + "/rerank", json={"query": "q", "texts": []})
    httpx.post(server.url + "/rerank", json={"query": "q", "texts": ["a"]})
    text = httpx.get(server.url + "/metrics").text
    for name in ("te_request_duration", "te_request_inference_duration", "te_request_tokenization_duration",
                 "te_request_queue_duration", "te_queue_size", "te_request_count", "te_request_success",
                 'te_request_failure_total{err="empty"}'):
        assert name in text


def test_health_is_503_until_loaded(tiny_model_dir):
    service = make_service(tiny_model_dir)
    app = create_app(service, load_in_background=False)
    from starlette.testclient import TestClient

    with TestClient(app) as client:
        assert client.get("/health").status_code == 503
        assert client.post("/rerank", json={"query": "q", "texts": ["a"]}).status_code == 503
        service.load()
        assert client.get("/health").status_code == 200


async def hindsight_tei_predict(url: str, pairs: list[tuple[str, str]], batch_size: int,
                                max_concurrent: int = 8, retries: int = 3) -> list[float]:
    """Mirrors Hindsight's RemoteTEICrossEncoder: group by query, chunk, gather, retry 429/5xx."""
    sem = asyncio.Semaphore(max_concurrent)
    async with httpx.AsyncClient(timeout=30) as client:
        info = (await client.get(url + "/info")).json()
        assert info.get("model_id")

        async def post(query: str, texts: list[str]) -> list[tuple[int, float]]:
            delay = 0.5  # Hindsight's retry_delay, doubling
            async with sem:
                for attempt in range(retries + 1):
                    resp = await client.post(url + "/rerank", json={"query": query, "texts": texts,
                                                                    "return_text": False})
                    if (resp.status_code == 429 or resp.status_code >= 500) and attempt < retries:
                        await asyncio.sleep(delay)
                        delay *= 2
                        continue
                    resp.raise_for_status()
                    return [(r["index"], r["score"]) for r in resp.json()]
            raise AssertionError("unreachable")

        groups: dict[str, list[tuple[int, str]]] = {}
        for idx, (q, t) in enumerate(pairs):
            groups.setdefault(q, []).append((idx, t))
        tasks, infos = [], []
        for q, items in groups.items():
            for i in range(0, len(items), batch_size):
                chunk = items[i:i + batch_size]
                infos.append([idx for idx, _ in chunk])
                tasks.append(post(q, [t for _, t in chunk]))
        scores = [0.0] * len(pairs)
        for indices, result in zip(infos, await asyncio.gather(*tasks), strict=True):
            for local, score in result:
                scores[indices[local]] = score
        return scores


@pytest.mark.parametrize("chunk", [3, 128])
def test_hindsight_client_over_a_whole_workload(tiny_model_dir, workload_file, chunk):
    workload = load_workload(workload_file)
    pairs = [(q.query, d) for q in workload.queries for d in q.documents]
    with LiveServer(make_service(tiny_model_dir, max_queue=4)) as live:
        merged = asyncio.run(hindsight_tei_predict(live.url, pairs, chunk))
    pos = 0
    pool = EnginePool(load_model_dir(tiny_model_dir), has_vnni=False)
    for q in workload.queries:
        expected = pool.engine(CONFIG).score(q.query, q.documents).scores
        assert np.abs(np.array(merged[pos:pos + len(q.documents)]) - expected).max() <= 1e-6
        pos += len(q.documents)


def test_raw_scores_default_for_old_hindsight(tiny_model_dir):
    """Hindsight <= 0.6.2 applies sigmoid itself: AUTOTUNE_RAW_SCORES=true keeps it applied once."""
    from starlette.testclient import TestClient

    service = RerankService(ServeSettings(config=CONFIG, model=str(tiny_model_dir), raw_scores_default=True),
                            has_vnni=False)
    service.load()
    with TestClient(create_app(service, load_in_background=False)) as client:
        ranks = client.post("/rerank", json={"query": "q", "texts": DOCS[:3]}).json()
        explicit = client.post("/rerank", json={"query": "q", "texts": DOCS[:3], "raw_scores": False}).json()
    expected = in_process(tiny_model_dir, "q", DOCS[:3])
    for r in ranks:
        assert r["score"] == pytest.approx(expected.raw[r["index"]], abs=1e-6)
    for r in explicit:
        assert r["score"] == pytest.approx(expected.scores[r["index"]], abs=1e-6)
    assert resolve_settings(None, None, environ={
        "AUTOTUNE_BATCH_SIZE": "1", "AUTOTUNE_INTRA_OP_THREADS": "0", "AUTOTUNE_LENGTH_SORT": "false",
        "AUTOTUNE_PRECISION": "fp32", "AUTOTUNE_RAW_SCORES": "true"}).raw_scores_default


def test_only_json_bodies_are_read(server):
    """TEI takes `application/json` only: text/plain, a form or no content type is 415, and never parsed."""
    body = json.dumps({"query": "q", "texts": ["a"]})
    for headers in ({"content-type": "text/plain"}, {"content-type": "application/x-www-form-urlencoded"}, {}):
        resp = httpx.post(server.url + "/rerank", content=body, headers=headers)
        assert resp.status_code == 415, headers
    resp = httpx.post(server.url + "/rerank", content=body, headers={"content-type": "application/json; charset=utf-8"})
    assert resp.status_code == 200
    assert httpx.get(server.url + "/health").status_code == 200


def test_a_dripping_body_is_408_and_the_server_stays_healthy(tiny_model_dir):
    async def drip():
        yield b'{"query": "q", '
        await asyncio.sleep(3)
        yield b'"texts": ["a"]}'

    async def post() -> httpx.Response:
        async with httpx.AsyncClient(timeout=30) as client:
            return await client.post(live.url + "/rerank", content=drip(), headers=JSON)

    with LiveServer(make_service(tiny_model_dir, body_timeout_s=0.5)) as live:
        resp = asyncio.run(post())
        assert resp.status_code == 408
        assert httpx.get(live.url + "/health").status_code == 200


def test_an_api_key_guards_everything_but_health(tiny_model_dir):
    with LiveServer(make_service(tiny_model_dir, api_key="s3cret")) as live:
        body = {"query": "q", "texts": ["a"]}
        assert httpx.post(live.url + "/rerank", json=body).status_code == 401
        wrong = {"authorization": "Bearer nope"}
        assert httpx.post(live.url + "/rerank", json=body, headers=wrong).status_code == 401
        assert httpx.get(live.url + "/info").status_code == 401
        assert httpx.get(live.url + "/metrics").status_code == 401
        assert httpx.get(live.url + "/health").status_code == 200
        good = {"authorization": "Bearer s3cret"}
        assert httpx.post(live.url + "/rerank", json=body, headers=good).status_code == 200
        assert httpx.get(live.url + "/info", headers=good).status_code == 200


def test_a_huge_query_scores_as_its_truncation_and_costs_what_the_model_sees(server, tiny_model_dir):
    """A 2 MB query is cut before tokenizing: it scores as any query whose first tokens are the same (the cut
    is exact: tests/runtime/test_tokenize.py), and the wait estimate counts what the model sees, not megabytes."""
    phrase = "where did Maya leave the keys "
    huge, head = phrase * 70_000, phrase * 70  # the head alone is past the model's length too
    texts = ["the keys are on the hook", "the boiler was fixed"]
    got = [{r["index"]: r["score"] for r in httpx.post(server.url + "/rerank", json={"query": q, "texts": texts},
                                                        timeout=120).json()} for q in (huge, head)]
    assert got[0] == pytest.approx(got[1], abs=1e-6)
    tokenizer = EnginePool(load_model_dir(tiny_model_dir), has_vnni=False).tokenizer
    assert all(len(q) < 100_000 for q, _ in tokenizer.pairs(huge, texts))  # never tokenized whole
    service = make_service(tiny_model_dir)
    assert service.work_chars(huge, texts) < 100_000 < len(huge)
