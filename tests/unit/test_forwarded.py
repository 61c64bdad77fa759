"""The client address the access log names, behind trusted proxies or not."""
from __future__ import annotations

import pytest

from keystore_service.web.forwarded import client_address, parse_trusted

LOOPBACK = parse_trusted("127.0.0.1,::1")


@pytest.mark.parametrize("peer, header, trusted, expected", [
    ("127.0.0.1", "203.0.113.9", LOOPBACK, "203.0.113.9"),  # the proxy vouches
    ("198.51.100.1", "203.0.113.9", LOOPBACK, "198.51.100.1"),  # not a trusted peer
    ("127.0.0.1", None, LOOPBACK, "127.0.0.1"),
    # read from the right: the nearest untrusted hop, not what the client wrote first
    ("127.0.0.1", "6.6.6.6, 203.0.113.9", LOOPBACK, "203.0.113.9"),
    ("10.0.0.2", "6.6.6.6, 203.0.113.9, 10.0.0.3", parse_trusted("10.0.0.0/8"),
     "203.0.113.9"),
    ("127.0.0.1", "6.6.6.6", parse_trusted("*"), "6.6.6.6"),
    # garbage is never logged: the last address a trusted hop vouched for
    ("127.0.0.1", "<script>", LOOPBACK, "127.0.0.1"),
    ("127.0.0.1", "٢.٢.٢.٢", LOOPBACK, "127.0.0.1"),  # Arabic-Indic digits
    ("127.0.0.1", "1.2.3.4:443", LOOPBACK, "127.0.0.1"),
    ("127.0.0.1", "fe80::1%eth0", LOOPBACK, "127.0.0.1"),
    ("127.0.0.1", "1.2.3.4\x00", LOOPBACK, "127.0.0.1"),
    ("127.0.0.1", "::ffff:203.0.113.9", LOOPBACK, "203.0.113.9"),
    ("::1", "2001:DB8::1", LOOPBACK, "2001:db8::1"),
    ("not-an-ip", "1.2.3.4", LOOPBACK, "-"),
    (None, None, LOOPBACK, "-"),
])
def test_client_address(peer, header, trusted, expected):
    assert client_address(peer, header, trusted) == expected


@pytest.mark.parametrize("spec", ["10.0.0.0/33", "localhost", "١٠.0.0.1", "1.2.3.4/8/1"])
def test_bad_trusted_lists_are_refused(spec):
    with pytest.raises(ValueError):
        parse_trusted(spec)
