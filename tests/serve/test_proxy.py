"""HAProxy's configuration for a group, checked by HAProxy itself (``haproxy -c``)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from serve.proxy import COOKIE, STARTING_PAGE, Forwarding, Proxy, config_text, haproxy
from testing.programs import needs

pytestmark = needs("haproxy")  # HAProxy itself checks each configuration
PAGE = "starting.http"


def check(text: str, folder: Path) -> subprocess.CompletedProcess[str]:
    (folder / PAGE).write_text(STARTING_PAGE)
    config = folder / "haproxy.cfg"
    config.write_text(text)
    return subprocess.run(
        [haproxy(), "-c", "-f", str(config)], capture_output=True, text=True, timeout=30
    )


def test_the_group_proxy_pins_browsers_and_proves_addresses(tmp_path: Path) -> None:
    text = config_text(
        ("127.0.0.1", 8000), [9001, 9002], Forwarding("X-Proxy-Secret", "s" * 64), tmp_path / PAGE
    )
    result = check(text, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"cookie {COOKIE} insert" in text  # a browser comes back to its worker
    assert "server w0 127.0.0.1:9001 cookie w0" in text and "127.0.0.1:9002 cookie w1" in text
    assert "set-header X-Proxy-Secret " + "s" * 64 in text
    assert "set-header X-Forwarded-For %[src]" in text  # the client's, not a forged one
    assert "timeout http-request 10000ms" in text  # a connection that says nothing ends


def test_behind_an_outer_proxy_its_headers_pass_untouched(tmp_path: Path) -> None:
    text = config_text(
        ("0.0.0.0", 8000), [9001], Forwarding("X-Proxy-Secret", None), tmp_path / PAGE
    )
    assert check(text, tmp_path).returncode == 0
    assert "set-header" not in text  # the outer proxy's secret and address reach the app


def test_a_port_in_use_ends_haproxy_with_the_cause_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proxy = Proxy.start(
            ("127.0.0.1", port), [9001], Forwarding("X-Proxy-Secret", None), tmp_path
        )
        try:
            proxy.process.wait(timeout=10)
            ended = proxy.ended()
        finally:
            proxy.stop()
    assert ended is not None and ended.startswith("HAProxy ended with exit code 1: ")
    assert f"cannot bind socket (Address already in use) for [127.0.0.1:{port}]" in ended
