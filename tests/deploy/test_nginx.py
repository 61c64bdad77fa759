"""The TLS proxy recipe (deploy/nginx/keystore.conf) in front of a real `keystore serve`,
with Debian's nginx as a real process on loopback and a self-signed certificate: the Python
client and the operators' page work through it, the page's cookie is Secure, the client's
real address reaches the access log (and a forged one does not), Retry-After and the error
envelope pass through, and a service that is down answers docs/api.md's 503."""
from __future__ import annotations

import re

import pytest
import requests
from keystore_client import KeyStore
from requests.adapters import HTTPAdapter

from tests.support import Server, new_token
from tests.support.nginx import Nginx

# The client connects from another loopback address than nginx's own (127.0.0.1), so the
# log can tell the client's address from the proxy's.
CLIENT_ADDRESS = "127.0.0.7"


class FromAddress(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (CLIENT_ADDRESS, 0)
        super().init_poolmanager(*args, **kwargs)


def session(cert, token=None) -> requests.Session:
    s = requests.Session()
    s.mount("https://", FromAddress())
    s.mount("http://", FromAddress())
    s.verify = str(cert) if cert else True
    s.trust_env = False  # else REQUESTS_CA_BUNDLE, if set, wins over `verify` (requests#3829)
    if token:
        s.headers["Authorization"] = f"Bearer {token}"
    return s


@pytest.fixture
def stack(database_url, tmp_path):
    server = Server(database_url, log_path=tmp_path / "service.log",
                    env={"KEYSTORE_ACCESS_LOG": "true"}).start()
    proxy = Nginx(tmp_path / "nginx", upstream=f"127.0.0.1:{server.port}").start()
    try:
        yield server, proxy
    finally:
        proxy.stop()
        server.stop()


def test_the_python_client_over_tls(stack, database_url):
    server, proxy = stack
    token = new_token(database_url, "acme")
    with KeyStore(proxy.url, token, session=session(proxy.cert)) as ks:
        first = ks.claim("create_invoice", "evt_tls", payload={"amount": 1})
        ks.complete("create_invoice", "evt_tls", first.lease_token,
                    result={"resource_id": "INV-1"})
        again = ks.claim("create_invoice", "evt_tls", payload={"amount": 1})
    assert again.outcome == "replay" and again.record.result.resource_id == "INV-1"
    # plain http is redirected to https, path and query kept
    r = session(proxy.cert).get(f"http://127.0.0.1:{proxy.http_port}/healthz?x=1",
                                allow_redirects=False, timeout=10)
    assert (r.status_code, r.headers["Location"]) == (
        308, f"https://127.0.0.1:{proxy.http_port}/healthz?x=1".replace(
            f":{proxy.http_port}", ""))


def test_the_real_client_address_reaches_the_access_log(stack, database_url):
    server, proxy = stack
    s = session(proxy.cert, new_token(database_url, "acme"))
    r = s.get(proxy.url + "/v1/whoami", headers={"X-Forwarded-For": "6.6.6.6",
                                                 "X-Request-Id": "proxy-test-1"}, timeout=10)
    assert r.status_code == 200
    server.stop()  # flush the log
    line = next(ln for ln in server.log_path.read_text().splitlines()
                if "request=proxy-test-1" in ln)
    assert line.endswith(f"client={CLIENT_ADDRESS}")  # not nginx's 127.0.0.1, not the forgery
    assert "6.6.6.6" not in server.log_path.read_text()
    assert proxy.access_log.read_text().startswith(CLIENT_ADDRESS)


def test_a_direct_client_cannot_forge_its_address_or_https(database_url, tmp_path):
    """Forwarded headers count only from a trusted proxy (loopback 127.0.0.1 by default
    here: this client comes from 127.0.0.7, which is not in the list)."""
    server = Server(database_url, log_path=tmp_path / "service.log",
                    env={"KEYSTORE_ACCESS_LOG": "true",
                         "KEYSTORE_FORWARDED_ALLOW_IPS": "127.0.0.1"}).start()
    try:
        s = session(None)
        r = s.get(server.url + "/ui/signin", timeout=10, headers={
            "X-Forwarded-For": "6.6.6.6", "X-Forwarded-Proto": "https",
            "X-Request-Id": "direct-1"})
        assert r.status_code == 200 and "Secure" not in r.headers["Set-Cookie"]
    finally:
        server.stop()
    line = next(ln for ln in server.log_path.read_text().splitlines() if "request=direct-1" in ln)
    assert line.endswith(f"client={CLIENT_ADDRESS}")


def test_the_operators_page_through_the_proxy_has_a_secure_cookie(stack, database_url):
    server, proxy = stack
    operator = new_token(database_url, "acme", "operator")
    s = session(proxy.cert)
    page = s.get(proxy.url + "/ui/signin", timeout=10)
    assert page.status_code == 200
    assert re.search(r"(?i);\s*secure", page.headers["Set-Cookie"])
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    r = s.post(proxy.url + "/ui/signin", data={"token": operator, "csrf_token": csrf},
               timeout=10, allow_redirects=False)
    assert r.status_code == 303 and r.headers["Location"].startswith("/ui/")
    assert re.search(r"(?i);\s*secure", r.headers["Set-Cookie"])
    assert s.get(proxy.url + r.headers["Location"], timeout=10).status_code == 200


def test_retry_after_and_the_error_envelope_pass_through(stack, database_url):
    server, proxy = stack
    s = session(proxy.cert, new_token(database_url, "acme"))
    claim = {"scope": "create_invoice", "key": "evt_busy", "payload": {"amount": 1}}
    assert s.post(proxy.url + "/v1/claim", json=claim, timeout=10).status_code == 201
    busy = s.post(proxy.url + "/v1/claim", json=claim, timeout=10)
    assert busy.status_code == 409 and int(busy.headers["Retry-After"]) >= 1
    assert busy.json()["error"]["code"] == "in_progress"
    other = s.post(proxy.url + "/v1/claim", json={**claim, "payload": {"amount": 2}}, timeout=10)
    assert (other.status_code, other.json()["error"]["code"]) == (422, "fingerprint_mismatch")
    big = s.post(proxy.url + "/v1/claim", timeout=30, headers={"Content-Type": "application/json"},
                 data=b'{"scope": "s", "key": "k", "payload": "' + b"x" * 1_200_000 + b'"}')
    assert (big.status_code, big.json()["error"]["code"]) == (413, "payload_too_large")
    assert big.json()["error"]["details"] == {"limit_bytes": 1048576}
    # a body of exactly the limit passes through
    head, tail = b'{"scope": "s", "key": "k", "payload": "', b'"}'
    edge = head + b"x" * (1048576 - len(head) - len(tail)) + tail
    assert len(edge) == 1048576
    r = s.post(proxy.url + "/v1/claim", data=edge, timeout=30,
               headers={"Content-Type": "application/json"})
    assert r.status_code == 201, r.text
    missing = s.get(proxy.url + "/v1/nothing-here", timeout=10)
    assert missing.json()["error"]["code"] in ("not_found", "unauthorized")


def test_a_service_that_is_down_answers_the_contracts_503(stack, database_url):
    server, proxy = stack
    s = session(proxy.cert, new_token(database_url, "acme"))
    server.stop()
    r = s.post(proxy.url + "/v1/claim", json={"scope": "s", "key": "k"}, timeout=10)
    assert r.status_code == 503 and r.headers["Retry-After"] == "5"
    assert r.json() == {"error": {"code": "unavailable", "details": {},
                                  "message": "the key store is not reachable; try again"}}
