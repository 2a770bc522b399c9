"""Hindsight 1.1.0's own rerankers, built from the environment alone, as its API builds them at start-up.

These are Hindsight's real classes (`create_cross_encoder_from_env`, its config loader), never a copy:
install them with `pip install -e '.[hindsight]'` (`.ci/run` does).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from autotune.workload.queries import load_workload


def hindsight_scores(env: dict[str, str], workload_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    """Build the reranker the way Hindsight's API does at start-up, from the environment alone."""
    from hindsight_api.config import clear_config_cache
    from hindsight_api.engine.cross_encoder import create_cross_encoder_from_env

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    clear_config_cache()
    try:
        encoder = create_cross_encoder_from_env()

        async def score_all() -> list[np.ndarray]:
            await encoder.initialize()
            out = []
            for q in load_workload(workload_path).queries:
                out.append(np.asarray(await encoder.predict([(q.query, d) for d in q.documents]), dtype=np.float64))
            return out

        return asyncio.run(score_all())
    finally:
        clear_config_cache()


def assert_same_scores(ours: list[np.ndarray], theirs: list[np.ndarray], atol: float) -> None:
    assert len(ours) == len(theirs)
    for q, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        np.testing.assert_allclose(a, b, atol=atol, err_msg=f"query #{q}")
        assert list(np.argsort(-a, kind="stable")) == list(np.argsort(-b, kind="stable")), f"order of query #{q}"


def hindsight_burst(env: dict[str, str], n: int, texts: list[str], monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """`n` recalls at once through Hindsight's own TEI client, built from the environment alone."""
    from hindsight_api.config import clear_config_cache
    from hindsight_api.engine.cross_encoder import create_cross_encoder_from_env

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    clear_config_cache()
    try:
        encoder = create_cross_encoder_from_env()

        async def go() -> list[bool]:
            await encoder.initialize()

            async def recall(i: int) -> bool:
                try:
                    await encoder.predict([(f"query {i}", t) for t in texts])
                    return True
                except RuntimeError:
                    return False
            return list(await asyncio.gather(*(recall(i) for i in range(n))))

        return asyncio.run(go())
    finally:
        clear_config_cache()
