"""The one outbound client (gateway/outbound.py) on real loopback sockets: it connects to the
address it checked, whatever a name resolves to the second time, and one deadline ends the
whole request, whichever phase the destination trickles (issue 25, items 1 and 2)."""
from __future__ import annotations

import socket
import time

import pytest

from keystore_service.gateway.destinations import Policy, Refused
from keystore_service.gateway.outbound import Outbound

from .trickling_sink import TricklingSink, _request

MARGIN = 0.75  # past the deadline: the reaper's wake-up and the test's own thread, loaded


class Answers:
    """A resolver that gives its answers in turn (the last one from then on)."""

    def __init__(self, *answers: list[str]):
        self.answers, self.calls = list(answers), []

    def __call__(self, name: str, port: int) -> list[str]:
        self.calls.append(name)
        return self.answers[min(len(self.calls), len(self.answers)) - 1]


@pytest.fixture
def quick():
    sink = TricklingSink("quick")
    yield sink
    sink.close()


def test_an_ip_literal_is_not_looked_up_and_the_answer_comes_back(quick):
    resolver = Answers(["169.254.169.254"])
    reply = Outbound(Policy(), resolver).request("POST", quick.url, b"{}", {}, 2, 4096)
    assert (reply.status, reply.body, reply.error) == (200, b"ok", None)
    assert resolver.calls == []  # the fast path: no lookup for 127.0.0.1


def test_a_name_is_looked_up_once_and_connected_to_as_checked(quick):
    """A name that resolves to an allowed address for the check and to the metadata address
    the next time: the request goes to the address checked, with the URL's Host."""
    resolver = Answers(["127.0.0.1"], ["169.254.169.254"])
    client = Outbound(Policy(), resolver, lookup_keep_seconds=0)  # every answer fresh
    url = f"http://Rebind.Test:{quick.port}/in?x=1"
    reply = client.request("POST", url, b"{}", {}, 2, 4096)
    assert reply.status == 200 and resolver.calls == ["rebind.test"]
    (got,) = quick.requests
    assert got["host"] == f"rebind.test:{quick.port}"
    assert got["request-line"] == "POST /in?x=1 HTTP/1.1"
    # the next request resolves again, to the metadata address: refused, nothing sent
    reply = client.request("POST", url, b"{}", {}, 2, 4096)
    assert reply.status is None and reply.error.startswith(
        "the destination resolves to a link-local or cloud-metadata address")
    assert len(quick.requests) == 1 and len(resolver.calls) == 2


def test_the_host_header_is_the_urls_whatever_the_caller_gives(quick):
    reply = Outbound(Policy()).request("POST", quick.url, b"{}",
                                       {"host": "169.254.169.254", "HOST": "x"}, 2, 4096)
    assert reply.status == 200
    assert quick.requests[0]["host"] == f"127.0.0.1:{quick.port}"
    assert quick.requests[0]["head"].lower().count("\r\nhost:") == 1


def test_a_names_answer_is_used_again_for_a_moment_and_checked_each_time(quick):
    resolver = Answers(["127.0.0.1"])
    client = Outbound(Policy(), resolver)
    url = f"http://kept.test:{quick.port}/in"
    assert [client.request("POST", url, b"{}", {}, 2, 4096).status for _ in range(3)] \
        == [200] * 3
    assert resolver.calls == ["kept.test"]  # one lookup for three forwards within 2 s
    client.policy = Policy("private")  # each use is checked again
    assert client.request("POST", url, b"{}", {}, 2, 4096).error.startswith(
        "the destination resolves to a loopback address")
    with pytest.raises(Refused):
        client.check(url)
    assert len(resolver.calls) == 2  # a source's check asks afresh


def test_a_name_with_any_refused_address_is_refused():
    resolver = Answers(["127.0.0.1", "::ffff:169.254.169.254"])
    reply = Outbound(Policy(), resolver).request("POST", "http://two.test/", b"", {}, 2, 1)
    assert reply.error.startswith("the destination resolves to a link-local")


def test_the_next_address_is_tried_when_one_refuses_the_connection(quick):
    """localhost may resolve to ::1 first while the workflow listens on 127.0.0.1 only."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.2", quick.port))  # bound, not listening: refuses
        resolver = Answers(["127.0.0.2", "127.0.0.1"])
        reply = Outbound(Policy(), resolver).request(
            "POST", f"http://localhost:{quick.port}/in", b"{}", {}, 2, 4096)
    assert reply.status == 200


def test_the_next_address_is_not_tried_once_a_request_went_out(quick):
    """An address that took the request and closed without an answer may have acted on it:
    the request is not sent again to the name's next address (the relay's retry follows)."""
    drop = TricklingSink("drop", "127.0.0.2", quick.port)
    try:
        reply = Outbound(Policy(), Answers(["127.0.0.2", "127.0.0.1"])).request(
            "POST", f"http://two.test:{quick.port}/in", b"{}", {}, 2, 4096)
        assert (reply.error, reply.sent) == ("no connection", True)
        assert len(drop.requests) == 1 and quick.requests == []
    finally:
        drop.close()


def test_a_name_that_does_not_resolve_is_no_connection_and_passes_the_check():
    def nothing(name, port):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    client = Outbound(Policy(), nothing)
    client.check("http://not-yet-up.test/")  # its requests fail until it resolves
    assert client.request("POST", "http://not-yet-up.test/", b"", {}, 2, 1).error \
        == "no connection"


def test_a_resolver_that_hangs_costs_the_deadline_and_no_more():
    def hangs(name, port):
        time.sleep(5)
        return ["127.0.0.1"]
    started = time.monotonic()
    reply = Outbound(Policy(), hangs).request("POST", "http://slow-dns.test/", b"", {}, 1, 1)
    assert reply.error == "timeout" and time.monotonic() - started < 1 + MARGIN


@pytest.mark.parametrize("mode", ["status", "headers", "body", "tls"])
def test_a_trickled_answer_ends_at_the_deadline_as_a_timeout(mode):
    """The destination sends a byte every 0.25 s (each receive is quick; the whole never
    ends): the request ends at its 1 s deadline, whichever phase trickles."""
    sink = TricklingSink(mode)
    try:
        url = sink.url.replace("http:", "https:") if mode == "tls" else sink.url
        started = time.monotonic()
        reply = Outbound(Policy()).request("POST", url, b"{}", {}, 1, 4096)
        took = time.monotonic() - started
        assert (reply.status, reply.error) == (None, "timeout") and took < 1 + MARGIN, took
        assert took > 0.9  # it was the deadline that ended it, not an error
    finally:
        sink.close()


def test_a_slow_lookup_and_a_slow_connect_share_the_deadline():
    """A listener whose accept queue is full drops SYNs: a slow connect, on loopback. After
    a lookup that took 0.5 s of the 1.5 s, the connect gets what is left, not its own 1.5 s."""
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        port = full.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=2):  # fills the queue
            def slow(name, port):
                time.sleep(0.5)
                return ["127.0.0.1"]
            started = time.monotonic()
            reply = Outbound(Policy(), slow).request(
                "POST", f"http://full.test:{port}/", b"{}", {}, 1.5, 1)
            took = time.monotonic() - started
    assert reply.error == "timeout" and 1.4 < took < 1.5 + MARGIN, took


def test_a_kept_alive_connection_is_watched_again_at_its_next_request():
    """The first request is quick and leaves its connection open; the second, on the same
    connection, trickles its headers: it is cut at its own deadline."""
    sink = TricklingSink("quick")
    try:
        client = Outbound(Policy())
        assert client.request("POST", sink.url, b"{}", {}, 2, 4096).status == 200
        sink.mode = "headers"
        started = time.monotonic()
        assert client.request("POST", sink.url, b"{}", {}, 1, 4096).error == "timeout"
        assert time.monotonic() - started < 1 + MARGIN
        assert len(sink.requests) == 2 and sink.most_open == 1  # one connection, reused
    finally:
        sink.close()


def _certificate(tmp_path, name: str) -> tuple[str, str]:
    """A self-signed certificate for `name` (its own CA) and its key, as files."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file)


def test_tls_to_the_checked_address_keeps_the_names_sni_and_certificate(tmp_path):
    """https://tls.test/ resolved to 127.0.0.1: the connection goes to the address, the TLS
    server name and the certificate check are tls.test's; a name the certificate does not
    carry fails (no connection), as it would without the address pinned."""
    import ssl
    import threading
    cert, key = _certificate(tmp_path, "tls.test")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    names: list = []
    context.sni_callback = lambda sock, name, ctx: names.append(name)
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve():
        while True:
            try:
                raw, _ = server.accept()
            except OSError:
                return
            try:
                with context.wrap_socket(raw, server_side=True) as conn:
                    _request(conn)  # all of it: a close with bytes unread resets
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            except (OSError, ssl.SSLError):
                pass
    threading.Thread(target=serve, daemon=True).start()
    try:
        client = Outbound(Policy(), Answers(["127.0.0.1"]), ca_certs=cert)
        reply = client.request("POST", f"https://tls.test:{port}/", b"{}", {}, 5, 4096)
        assert (reply.status, reply.body) == (200, b"ok") and names == ["tls.test"], reply
        reply = client.request("POST", f"https://other.test:{port}/", b"{}", {}, 5, 4096)
        assert reply.error == "no connection" and names[-1] == "other.test"
    finally:
        server.close()
