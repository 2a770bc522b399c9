"""The Hindsight-like TEI client: its settings read as Hindsight reads them, and its retry delays."""
from __future__ import annotations

import time

from autotune.serve.tei_client import ClientSettings, retry_delay


def test_retry_after_is_capped_and_jittered_like_hindsights():
    for _ in range(50):
        assert 2.5 <= retry_delay({"retry-after": "60"}, 0.5, 30.0) <= 5.0
        assert 1.0 <= retry_delay({"retry-after": "1"}, 0.5, 30.0) <= 1.5
        assert 0.5 <= retry_delay({}, 0.5, 30.0) <= 0.75


def test_an_http_date_counts_as_seconds_from_now_and_garbage_as_none():
    import email.utils

    soon = email.utils.formatdate(time.time() + 3, usegmt=True)
    assert 1.0 <= retry_delay({"retry-after": soon}, 0.5, 30.0) <= 4.5
    for junk in ("soon", "Mon, 99 Foo"):
        assert 0.5 <= retry_delay({"retry-after": junk}, 0.5, 30.0) <= 0.75  # the backoff, as if absent


def test_settings_are_read_as_hindsight_reads_them():
    from autotune.measure.client_sizing import HTTP_TIMEOUT_KEY, MAX_CONCURRENT_KEY
    from autotune.serve.tei_client import BATCH_SIZE_KEY

    assert ClientSettings.from_env({}) == ClientSettings()
    assert (ClientSettings().batch_size, ClientSettings().max_concurrent, ClientSettings().http_timeout_s) == (
        128, 8, 30.0)  # Hindsight 1.1's TEI defaults
    got = ClientSettings.from_env({BATCH_SIZE_KEY: "300", MAX_CONCURRENT_KEY: "2", HTTP_TIMEOUT_KEY: "45"})
    assert (got.batch_size, got.max_concurrent, got.http_timeout_s) == (300, 2, 45.0)
