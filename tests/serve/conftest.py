from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.http import LiveServer
from tests.support.serving import make_service


@pytest.fixture()
def server(tiny_model_dir) -> Iterator[LiveServer]:
    with LiveServer(make_service(tiny_model_dir, max_client_batch_size=64)) as live:
        yield live
