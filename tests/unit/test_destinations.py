"""Where the service may send a request (gateway/destinations.py), without HTTP: a host must be
given in its plain spelling, and each address (an IP literal, or what a name resolves to)
is judged by the policy, IPv6 forms that embed an IPv4 address by that address too."""
from __future__ import annotations

import ipaddress

import pytest

from keystore_service.gateway.destinations import Policy, Refused, parse

OTHER_SPELLINGS = [  # every one of these reached a refused address before (issue 25)
    "http://169%2E254%2E169%2E254/latest/meta-data/",  # percent-encoded dots
    "http://%31%36%39.254.169.254/",  # percent-encoded digits
    "http://%30%32%35%32%2E%30%33%37%36%2E%30%32%35%32%2E%30%33%37%36/",  # long %30 octal
    "http://127%2E0%2E0%2E1:8080/x",
    "http://2130706433/",  # 127.0.0.1 as one decimal number
    "http://2852039166/",  # 169.254.169.254 as one decimal number
    "http://0x7f.1/", "http://0x7f000001/", "http://0XA9FEA9FE/",  # hex
    "http://0177.0.0.1/", "http://0251.0376.0251.0376/",  # octal
    "http://127.1/", "http://169.254.43518/", "http://127.0.1/",  # short forms
    "http://127.0.0.01/", "http://127.000.000.001/",  # leading zeros
    "http://256.0.0.1/", "http://1.2.3.4.5/",  # not an address at all
    "http://localhost./", "http://169.254.169.254./", "http://metadata.google.internal./",
    "http://[fe80::1%25eth0]/", "http://[::1%25lo]/",  # zone ids
    "http://[::1/", "http://[v1.fe80]/", "http://[not:an:address]/", "http://[127.0.0.1]/",
    "http://exa mple/", "http://ex\\ample/", "http://a..b/", "http://-%00/",
    "http://" + "a" * 64 + ".example/",
    "http://127.0.0.1:0/", "http://127.0.0.1:65536/", "http://127.0.0.1:+80/",
    "http://127.0.0.1:80:80/",
    "http://user:pw@127.0.0.1/", "http://@127.0.0.1/",
    "ftp://127.0.0.1/", "javascript:alert(1)", "http:///x", "http://",
    "http://\u0661\u0662\u0667.0.0.1/",  # Arabic-Indic digits, which int() reads
]


@pytest.mark.parametrize("url", OTHER_SPELLINGS)
def test_a_host_in_another_spelling_is_refused(url):
    with pytest.raises(Refused) as refused:
        parse(url)
    assert str(refused.value).startswith("the destination")  # final, for the relay


@pytest.mark.parametrize("url,host,ip,port,path,header", [
    ("http://127.0.0.1:5678/webhook?a=1#f", "127.0.0.1", "127.0.0.1", 5678,
     "/webhook?a=1", "127.0.0.1:5678"),
    ("HTTP://LOCALHOST:8080", "localhost", None, 8080, "/", "localhost:8080"),
    ("https://N8N.Example.com/x", "n8n.example.com", None, 443, "/x", "n8n.example.com"),
    ("http://[::1]:80/x", "[::1]", "::1", 80, "/x", "[::1]"),
    ("http://[0:0:0:0:0:0:0:1]:81/", "[0:0:0:0:0:0:0:1]", "::1", 81, "/", "[::1]:81"),
    ("http://my_workflow:5678/", "my_workflow", None, 5678, "/", "my_workflow:5678"),
    ("http://10.0.0.7:/x", "10.0.0.7", "10.0.0.7", 80, "/x", "10.0.0.7"),
    ("http://0.0.0.0/", "0.0.0.0", "0.0.0.0", 80, "/", "0.0.0.0"),
])
def test_plain_spellings_are_parsed(url, host, ip, port, path, header):
    t = parse(url)
    assert (t.host, t.port, t.path, t.host_header) == (host, port, path, header)
    assert t.ip == (ipaddress.ip_address(ip) if ip else None)


ALWAYS_REFUSED = ["169.254.169.254", "169.254.0.1", "100.100.100.200", "fe80::1",
                  "FE80::abcd", "febf::1", "fd00:ec2::254",
                  "::ffff:169.254.169.254",  # IPv4-mapped
                  "::169.254.169.254",  # IPv4-compatible
                  "::ffff:0:169.254.169.254",  # SIIT
                  "64:ff9b::169.254.169.254", "64:ff9b::a9fe:a9fe",  # NAT64
                  "64:ff9b:1::a9fe:a9fe",  # NAT64, local use
                  "2002:a9fe:a9fe::1",  # 6to4
                  "::ffff:100.100.100.200"]
LOOPBACK = ["127.0.0.1", "127.255.255.254", "0.0.0.0", "0.1.2.3", "::1", "::",
            "::ffff:127.0.0.1", "::127.0.0.1", "::ffff:0:127.0.0.1", "64:ff9b::7f00:1",
            "2002:7f00:1::", "::ffff:0.0.0.0"]
PRIVATE = ["10.0.0.7", "172.16.0.1", "192.168.1.1", "100.64.0.1", "fc00::1", "fd12::1",
           "::ffff:10.0.0.7", "2002:c0a8:101::1", "198.18.0.1", "192.0.2.1", "224.0.0.1",
           "255.255.255.255", "2001:db8::1", "ff02::1", "100.100.100.199"]
PUBLIC = ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8",
          "64:ff9b::808:808", "2002:808:808::1", "100.128.0.1", "169.253.255.255"]


def check(mode, address, allow_link_local=False):
    Policy(mode, allow_link_local).check(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ALWAYS_REFUSED)
@pytest.mark.parametrize("mode", ["any", "private", "public"])
def test_link_local_and_metadata_addresses_are_refused_in_every_mode(mode, address):
    with pytest.raises(Refused, match="the destination resolves to"):
        check(mode, address)
    if mode != "public":  # unless configured; public refuses every non-public address
        check(mode, address, allow_link_local=True)


@pytest.mark.parametrize("address", LOOPBACK + PRIVATE + PUBLIC)
def test_any_allows_loopback_private_and_public(address):
    check("any", address)


@pytest.mark.parametrize("address", LOOPBACK)
def test_private_refuses_loopback_in_every_form(address):
    with pytest.raises(Refused, match="loopback"):
        check("private", address)


@pytest.mark.parametrize("address", PRIVATE + PUBLIC)
def test_private_allows_private_and_public(address):
    check("private", address)


@pytest.mark.parametrize("address", LOOPBACK + PRIVATE)
def test_public_refuses_everything_not_globally_routable(address):
    with pytest.raises(Refused, match="not public"):
        check("public", address)


@pytest.mark.parametrize("address", PUBLIC)
def test_public_allows_public(address):
    check("public", address)


def test_an_unknown_mode_is_an_error():
    with pytest.raises(ValueError):
        Policy("open")
