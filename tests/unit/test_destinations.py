"""Where the relay may forward (hooks/destinations.py), without HTTP: addresses in their
standard spelling are judged as they are, every other spelling by what it resolves to."""
from __future__ import annotations

import pytest

from keystore_service.hooks.destinations import Refused, check_address


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/",
    "http://[fe80::1]/x",
    "http://[fe80::1%25eth0]/x",  # with a zone
    "http://[fd00:ec2::254]/",
    "http://[::ffff:169.254.169.254]/",  # IPv4-mapped
    "http://2852039166/",  # 169.254.169.254 as one decimal number: the resolver reads it
    "http://0xa9fea9fe/",  # ... and in hex
    "http://169.254.43518/",  # ... and as a.b.c
])
def test_link_local_and_metadata_addresses_are_refused_in_any_spelling(url):
    with pytest.raises(Refused):
        check_address(url, allow_link_local=False)
    check_address(url, allow_link_local=True)  # unless configured


@pytest.mark.parametrize("url", ["http://127.0.0.1:5678/webhook", "http://[::1]/x",
                                 "http://10.0.0.7/x", "http://2130706433/x",
                                 "http://localhost:8080/x"])
def test_loopback_and_private_addresses_are_allowed(url):
    check_address(url, allow_link_local=False)
