"""`serve`'s process start: an address it cannot listen on and a missing model are one line each (exit 4 and
3), found before uvicorn starts and logs a traceback."""

from __future__ import annotations

import socket

import pytest

from autotune.errors import ModelError, OptionsError
from autotune.serve.app import check_bindable, serve
from autotune.serve.settings import ServeSettings
from tests.support.serving import CONFIG


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_a_port_out_of_range_is_refused(port):
    with pytest.raises(OptionsError, match="between 1 and 65535"):
        check_bindable("127.0.0.1", port)


def test_a_taken_port_is_named():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OptionsError, match=f"cannot listen on 127.0.0.1:{port}"):
            check_bindable("127.0.0.1", port)
    check_bindable("127.0.0.1", port)  # free again: no error


def test_a_missing_model_stops_serve_before_it_listens(tmp_path):
    said: list[str] = []
    settings = ServeSettings(config=CONFIG, model=str(tmp_path / "no-such-model"))
    with pytest.raises(ModelError):
        serve(settings, "127.0.0.1", free_port(), announce=said.append)
    assert said == []  # nothing announced: it never got as far as listening


@pytest.mark.parametrize(("host", "url"), [("127.0.0.1", "http://127.0.0.1:8080"), ("::", "http://[::]:8080"),
                                           ("::1", "http://[::1]:8080"), ("localhost", "http://localhost:8080")])
def test_the_banner_url_brackets_an_ipv6_host(host, url):
    from autotune.serve.app import listen_url

    assert listen_url(host, 8080) == url


def test_an_ipv6_host_in_brackets_is_bound_as_the_address():
    """`serve --host [::1]` once said "Name or service not known" (issue 50, item 7)."""
    import socket

    from autotune.serve.app import check_bindable

    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("this host has no IPv6 loopback")
    check_bindable("[::1]", free_port())
