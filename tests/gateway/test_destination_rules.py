"""The destination rules through the API and the relay, on both backends: another spelling
of a host is 400 at a source's create and PATCH (and changes nothing), the modes of
KEYSTORE_HOOK_DESTINATIONS, a refused address is a final failure at the forward, and the
forward connects to the address it checked when the name's answer changes (issue 25)."""
from __future__ import annotations

import socket

import pytest

from keystore_service.app import create_app
from keystore_service.gateway.destinations import Policy
from keystore_service.gateway.outbound import Outbound
from keystore_service.settings import Settings
from tests.support import T0, Http

from .support import KEY, SPELLINGS, create_source, deliver, delivery, pump
from .trickling_sink import TricklingSink


def patch(gw, name, body):
    r = gw.client.patch(f"/v1/sources/{name}", json=body, headers=gw._auth(...))
    return r.status_code, r.get_json(silent=True)


@pytest.mark.parametrize("url", SPELLINGS)
def test_another_spelling_or_a_refused_address_is_400_at_create_and_patch(gw, sink, url):
    url = url.format(port=sink.url.split(":")[2].split("/")[0])
    status, body, _ = gw.post("/v1/sources", {"name": "bad", "provider": "testing",
                                              "secrets": ["s"], "destination": {"url": url}})
    assert status == 400, body
    assert body["error"]["code"] == "invalid_request"
    assert body["error"]["message"].startswith("the destination")
    assert body["error"]["details"] == {"field": "destination.url"}
    assert gw.get("/v1/sources")[1]["sources"] == []
    create_source(gw, gw.token, sink.url)
    status, body = patch(gw, "shop", {"destination": {"url": url}})
    assert status == 400 and body["error"]["details"] == {"field": "destination.url"}
    (shown,) = gw.get("/v1/sources")[1]["sources"]
    assert shown["destination"]["url"] == sink.url  # unchanged


def app_with(database_url, mode):
    return create_app(Settings(database_url=database_url, secret_key=KEY,
                               token_cache_seconds=0, hook_destinations=mode))


@pytest.mark.parametrize("mode,refused", [
    ("any", []),
    ("private", ["http://127.0.0.1:5678/", "http://localhost:5678/", "http://[::1]/",
                 "http://0.0.0.0/",
                 "http://[::ffff:127.0.0.1]/", "http://[::]/"]),
    ("public", ["http://127.0.0.1:5678/", "http://10.0.0.7/", "http://192.168.1.2/",
                "http://[fd12::1]/", "http://[::ffff:10.0.0.7]/", "http://100.64.0.1/"]),
])
def test_the_modes_at_create(database_url, mode, refused):
    app = app_with(database_url, mode)
    try:
        ks = app.extensions["keystore"]
        assert ks.gateway.forwarding.outbound is ks.gateway.sources.outbound  # one client
        assert ks.gateway.forwarding.outbound.policy.mode == mode
        ks.accounts.create_tenant("acme", T0)
        http = Http(app.test_client(), ks.accounts.create_token("acme", "operator", None, T0))
        allowed = {"any": "http://127.0.0.1:5678/", "private": "http://10.0.0.7/",
                   "public": "http://8.8.8.8/"}[mode]
        for n, url in enumerate(refused):
            status, body, _ = http.post("/v1/sources", {
                "name": f"s{n}", "provider": "testing", "secrets": ["s"],
                "destination": {"url": url}})
            assert status == 400, (url, body)
            assert mode in body["error"]["message"]
        create_source(http, http.token, allowed)
    finally:
        app.extensions["keystore"].database.engine.dispose()


def test_a_name_that_resolves_to_a_refused_address_is_400(gw, monkeypatch):
    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: real(
        "169.254.169.254" if host == "metadata.test" else host, *a, **k))
    status, body, _ = gw.post("/v1/sources", {
        "name": "bad", "provider": "testing", "secrets": ["s"],
        "destination": {"url": "http://metadata.test/latest/meta-data/"}})
    assert status == 400 and "link-local or cloud-metadata" in body["error"]["message"]
    assert "169.254" not in body["error"]["message"]  # the address it resolved to is not told


def test_a_refused_address_at_the_forward_is_a_final_failure(gw, gw_app, sink, forwarding):
    """A source made while loopback was allowed, forwarded after the operator chose
    `private`: the forward is refused (no request), the delivery fails for good."""
    create_source(gw, gw.token, sink.url)
    deliver(gw, gw.get("/v1/sources")[1]["sources"][0])
    forwarding.outbound = Outbound(Policy("private"))
    assert pump(forwarding) == ["failed"] and sink.requests == []
    (attempt,) = delivery(gw)["attempts"]
    assert attempt["error"].startswith("the destination resolves to a loopback address")


def test_the_forward_connects_to_the_address_it_checked(gw, forwarding, monkeypatch):
    """The system resolver answers 127.0.0.1 for rebind.test to the source's check and to
    the forward's lookup, then 127.0.0.2 (standing in for 169.254.169.254, which a test may
    not reach): the request reaches the sink on 127.0.0.1; before, urllib3 resolved the
    name again after the check and connected to whatever that said."""
    good = TricklingSink("quick")
    port = good.port
    evil = TricklingSink("quick", "127.0.0.2", port)
    real, asked = socket.getaddrinfo, []

    def rebinding(host, *args, **kwargs):
        if host != "rebind.test":
            return real(host, *args, **kwargs)
        asked.append(host)
        to = "127.0.0.1" if len(asked) <= 2 else "127.0.0.2"
        return real(to, *args, **kwargs)
    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    try:
        source = create_source(gw, gw.token, f"http://rebind.test:{port}/in")
        deliver(gw, source)
        assert pump(forwarding) == ["delivered"]
        assert len(good.requests) == 1 and evil.requests == []
        assert good.requests[0]["host"] == f"rebind.test:{port}"
        assert len(asked) == 2  # the create's check, the forward's one lookup
    finally:
        good.close()
        evil.close()
