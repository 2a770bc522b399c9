"""`hindsight.ordering` against a real Hindsight 1.1.0: a recording replayed at the pool Hindsight had returns the
results Hindsight returned, and replayed at a smaller cap it returns, id for id, what Hindsight returns when it
runs with that cap (`MAX_CANDIDATES_LOW`/`_MID`)."""

from __future__ import annotations

import httpx
import pytest

from autotune.hindsight.trace import pool_facts, recall_pool
from autotune.runtime.model import build_default_model
from autotune.workload.queries import load_workload
from tests.support.real_hindsight import cli, memories, onnx_defaults, real_hindsight_or_skip

pytestmark = pytest.mark.slow  # a real Hindsight on PostgreSQL: minutes

QUERIES = ["What is Maya allergic to?", "When does the deployment freeze start and end?",
           "What happened with the boiler?", "How do I restart the staging environment?",
           "What was decided about the churn analysis?"]
CAPS = {"low": 8, "mid": 20}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("ordering")
    with real_hindsight_or_skip(work / "hindsight") as h:
        base = {**onnx_defaults(build_default_model().directory), "HINDSIGHT_API_RERANKER_ONNX_TIMEOUT": "0"}
        url = h.start(base)
        h.retain("ordering", memories(240))
        (work / "q.txt").write_text("\n".join(QUERIES) + "\n")
        status, out, err = cli("record", "--url", url, "--bank", "ordering", "--queries", str(work / "q.txt"),
                               "--budget", "low,mid", "-o", str(work / "rec.jsonl"))
        assert status == 0, out + err
        recorded = load_workload(work / "rec.jsonl")
        h.start({**base, **{f"HINDSIGHT_API_RERANKER_MAX_CANDIDATES_{level.upper()}": str(cap)
                            for level, cap in CAPS.items()}})
        capped = {}
        with httpx.Client(base_url=url, timeout=120) as client:
            for q in recorded.queries:
                resp = client.post("/v1/default/banks/ordering/memories/recall",
                                   json={"query": q.query, "budget": q.budget, "trace": True})
                assert resp.status_code == 200, resp.text
                capped[(q.query, q.budget)] = resp.json()
        yield recorded, capped, out


def test_a_recording_replays_to_the_results_hindsight_returned(live):
    recorded, _capped, out = live
    replays = [q.extra.get("replay") for q in recorded.queries]
    assert all(r is not None and r["reproduced"] for r in replays), out
    assert any(len(r["results"]) < len(r["pool"]) for r in replays), "the token budget never bound: a weak test"
    assert "note:" not in out  # nothing limits this recording's replay


def test_a_capped_live_recall_returns_the_replays_ids_in_order(live):
    recorded, capped, _out = live
    trimmed = compared = 0
    for q in recorded.queries:
        cap = CAPS[q.budget]
        response = capped[(q.query, q.budget)]
        pool = recall_pool(q.extra["replay"], q.extra["node_ids"])
        kept = pool.kept(cap)
        trimmed += len(pool.pool) > cap
        survivors = {str(c["node_id"]) for c in response["trace"]["reranked"]}
        mine = {pool.node_ids[i] for i in kept}
        # A restarted Hindsight fuses a slightly different pool (candidates whose retrieval ranks tie come back in
        # another order, so their RRF scores move): the recording's cut can swap a few at its edge, and did (3 of 8
        # in one CI run). That is Hindsight's restart, not our cut; what is ours to hold is that the capped recall's
        # own fused pool cuts to exactly its survivors, below.
        assert len(mine) == len(survivors), (q.query, q.budget)
        reranked = response["trace"]["reranked"]
        own = recall_pool(pool_facts(response, "o200k_base"), [str(c["node_id"]) for c in reranked])
        own_kept = own.kept(cap)
        assert {own.node_ids[i] for i in own_kept} == survivors, (q.query, q.budget)
        live_ids = [str(r["id"]) for r in response["results"]]
        live_raw = {str(c["node_id"]): c["score_components"]["cross_encoder_score"] for c in reranked}
        live_weight = {str(c["node_id"]): c["rerank_score"] for c in reranked}
        # recency is computed against the moment of each recall: the capped recall's own pool, boosts and
        # scores replay it exactly
        exact = own.results(own_kept, [live_raw[own.node_ids[i]] for i in own_kept])
        assert exact == live_ids, (q.query, q.budget)
        if mine != survivors:
            continue  # the recording cut another pool: its order cannot be compared one for one
        compared += 1
        raw = q.extra["hindsight_scores"]
        replayed = pool.results(kept, [raw[i] for i in kept])
        assert sorted(replayed) == sorted(live_ids)
        for ours, theirs in zip(replayed, live_ids, strict=True):
            assert ours == theirs or abs(live_weight[ours] - live_weight[theirs]) < 1e-5, (q.query, ours, theirs)
    assert trimmed >= len(recorded.queries) // 2, "most pools must be larger than the cap, or nothing is tested"
    assert compared, "no recording cut the pool the restarted Hindsight fused: its replayed order was never compared"
