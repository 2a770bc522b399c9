from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from autotune.fileio import write_atomic
from autotune.outputs.compose import compose_override, render_compose

HINDSIGHT_LIKE = """
services:
  db:
    image: pgvector/pgvector:pg18
    networks: [hindsight-net]
  hindsight:
    image: ghcr.io/vectorize-io/hindsight:latest
    environment:
      - HINDSIGHT_API_RERANKER_PROVIDER=${HINDSIGHT_API_RERANKER_PROVIDER:-local}
    depends_on: [db]
    networks: [hindsight-net]
networks:
  hindsight-net:
    driver: bridge
"""


def test_override_structure(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = Path("compose.autotune.yaml")
    write_atomic(path, render_compose(profile_dir=Path("profiles"), env_file=Path(".env")))
    data = yaml.safe_load(path.read_text())
    reranker = data["services"]["reranker"]
    assert reranker["command"][:2] == ["--host", "0.0.0.0"]  # arguments to the image's `autotune serve`
    assert "entrypoint" not in reranker and "cpus" not in reranker
    assert reranker["env_file"] == ["./.env"]
    assert "./profiles:/app/profiles:ro" in reranker["volumes"]
    assert any(v.endswith(":/cache") for v in reranker["volumes"])
    assert reranker["networks"] == ["hindsight-net"] and "hindsight-net" in data["networks"]
    hindsight = data["services"]["hindsight"]
    assert hindsight["env_file"] == ["./.env"]  # a .env alone only feeds ${...} substitutions
    assert hindsight["depends_on"]["reranker"]["condition"] == "service_healthy"
    assert set(yaml.safe_load(HINDSIGHT_LIKE)["services"]) & set(data["services"]) == {"hindsight"}


def test_the_override_holds_the_cores_and_checks_the_container_at_start():
    data = compose_override(profile_dir=Path("profiles"), env_file=Path(".env"), cpus=2, profile_file="node.yaml")
    reranker = data["services"]["reranker"]
    assert reranker["cpus"] == 2 and reranker["entrypoint"] == ["sh", "-c"]
    script = reranker["command"][0]
    assert script.startswith("autotune check --profile /app/profiles/node.yaml ||")
    assert script.endswith("exec autotune serve --host 0.0.0.0 --port 8080")


def test_the_image_is_a_drop_in_for_teis():
    dockerfile = (Path(__file__).resolve().parents[2] / "docker" / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["autotune", "serve"]' in dockerfile
    assert "from autotune.runtime.model import build_default_model" in dockerfile


def test_service_name_is_configurable():
    data = compose_override(profile_dir=Path("profiles"), env_file=Path(".env"), hindsight_service="api")
    assert "api" in data["services"] and "hindsight" not in data["services"]


def _compose_cli() -> list[str] | None:
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


@pytest.mark.skipif(_compose_cli() is None, reason="no docker compose plugin here; structure is checked above")
def test_docker_compose_accepts_the_override(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("docker-compose.yaml").write_text(HINDSIGHT_LIKE)
    Path(".env").write_text("HINDSIGHT_API_RERANKER_PROVIDER=tei\n")
    Path("profiles").mkdir()
    write_atomic(Path("compose.autotune.yaml"), render_compose(profile_dir=Path("profiles"), env_file=Path(".env")))
    cli = _compose_cli()
    assert cli is not None
    result = subprocess.run([*cli, "-f", "docker-compose.yaml", "-f", "compose.autotune.yaml", "config"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    merged = yaml.safe_load(result.stdout)
    assert merged["services"]["hindsight"]["environment"]["HINDSIGHT_API_RERANKER_PROVIDER"] == "tei"


def test_compose_keeps_the_profiles_own_container_path(tmp_path):
    """`autotune compose` without the flag mounts where the profile says, and only then at /models/reranker."""
    import yaml as _yaml

    from autotune.outputs.compose import write_for_profile

    profile = {"target": "onnx", "model": {"dir": "models/n", "path_in_container": "/opt/rr"}}
    out = write_for_profile(profile, tmp_path / "profiles" / "n.yaml", env_file=tmp_path / ".env",
                            out=tmp_path / "compose.autotune.yaml")
    assert _yaml.safe_load(out.read_text())["services"]["hindsight"]["volumes"][0].endswith(":/opt/rr:ro")
    del profile["model"]["path_in_container"]
    write_for_profile(profile, tmp_path / "profiles" / "n.yaml", env_file=tmp_path / ".env", out=out)
    assert _yaml.safe_load(out.read_text())["services"]["hindsight"]["volumes"][0].endswith(":/models/reranker:ro")
