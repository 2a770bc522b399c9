"""What `serve` runs with: a profile's keys, or a `.env` and the environment; a bad value is one line at start."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from autotune.errors import OptionsError
from autotune.outputs.profile import write_profile
from autotune.runtime.engine import EngineConfig
from autotune.runtime.targets.sidecar_keys import SidecarKeys
from autotune.serve.routes import create_app
from autotune.serve.service import RerankService
from autotune.serve.settings import ServeSettings, resolve_settings
from tests.support.corpus import DOCS

CONFIG = EngineConfig(batch_size=4, intra_op_threads=1, length_sort=True, precision="fp32")
REQUIRED = {"AUTOTUNE_BATCH_SIZE": "4", "AUTOTUNE_INTRA_OP_THREADS": "0", "AUTOTUNE_LENGTH_SORT": "true",
            "AUTOTUNE_PRECISION": "fp32"}


def test_settings_from_env_file_and_environment(tmp_path):
    env = tmp_path / ".env"
    env.write_text("AUTOTUNE_BATCH_SIZE=8\nAUTOTUNE_INTRA_OP_THREADS=2\nAUTOTUNE_LENGTH_SORT=true\n"
                   "AUTOTUNE_PRECISION=int8\nAUTOTUNE_MODEL=default\n")
    s = resolve_settings(None, env, environ={"AUTOTUNE_BATCH_SIZE": "16"})
    assert s.config == EngineConfig(16, 2, True, "int8")
    with pytest.raises(OptionsError, match="AUTOTUNE_BATCH_SIZE"):
        resolve_settings(None, None, environ={})


@pytest.mark.parametrize("batch", ["1000000000", "0"])
def test_a_batch_size_no_request_could_fill_is_refused_at_start(batch):
    with pytest.raises(OptionsError, match="batch size"):
        resolve_settings(None, None, environ={**REQUIRED, "AUTOTUNE_BATCH_SIZE": batch})


def test_a_profile_carries_the_limits_its_run_measured(tmp_path):
    """The burst figure a profile states holds only under the limits its run wrote: serve reads them back."""
    keys = SidecarKeys(CONFIG, max_batch_tokens=4096, max_input_length=300)
    path = write_profile(tmp_path, "p", {"schema": 1, "name": "p", "target": "tei", "config": CONFIG.to_dict(),
                                         "model": {"ref": "default"}, "env": keys.to_env()})
    s = resolve_settings(path, None, environ={})
    assert (s.max_batch_tokens, s.max_input_length) == (4096, 300)
    assert resolve_settings(None, None, environ=REQUIRED).max_input_length is None  # the model's own


@pytest.mark.parametrize("value", ["0", "-5", "long"])
def test_a_bad_input_length_is_one_line(value):
    with pytest.raises(OptionsError, match="AUTOTUNE_MAX_INPUT_LENGTH"):
        resolve_settings(None, None, environ={**REQUIRED, "AUTOTUNE_MAX_INPUT_LENGTH": value})


def test_serve_cuts_inputs_at_the_input_length(tiny_model_dir):
    """Past the cut, `truncate: false` is TEI's 422, and a truncated text scores as its first tokens do."""
    service = RerankService(ServeSettings(config=CONFIG, model=str(tiny_model_dir), max_input_length=16),
                            has_vnni=False)
    service.load()
    long = " ".join(["boiler"] * 40)
    with TestClient(create_app(service, load_in_background=False)) as client:
        assert client.get("/info").json()["max_input_length"] == 16
        refused = client.post("/rerank", json={"query": "q", "texts": [long], "truncate": False})
        assert refused.status_code == 422 and "16 tokens" in refused.json()["error"]
        cut = client.post("/rerank", json={"query": "q", "texts": [long, " ".join(["boiler"] * 30)]}).json()
        short = client.post("/rerank", json={"query": "q", "texts": DOCS[:1]}).json()
    assert cut[0]["score"] == pytest.approx(cut[1]["score"], abs=1e-6)  # both cut to the same 16 tokens
    assert short[0]["score"] != pytest.approx(cut[0]["score"], abs=1e-6)
