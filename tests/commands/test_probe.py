"""`autotune probe`: what it reports about the host, as JSON."""

from __future__ import annotations

import json

from tests.support.cli import run_cli


def test_probe_json():
    status, out, _ = run_cli(["probe", "--json"])
    data = json.loads(out)
    assert status == 0 and set(data["cores"]) == {"physical", "logical", "usable"}
    assert len(data["fingerprint"]) == 12
