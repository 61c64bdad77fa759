"""Several destinations from the command line (issue 29): `keystore source create` and
`keystore source update` take `--destinations FILE` (the API's destinations list as JSON, '-'
for stdin after the signing secrets) instead of `--destination` and its options, and `keystore
source show` prints every destination, never a secret. Both backends."""
from __future__ import annotations

import json

from .support import SECRET, Sink, cli, deliver, pump

SINK = "http://127.0.0.1:9/hook"  # never reached: these tests forward nothing
OTHER = "http://127.0.0.1:9/other"
SIGNING = "whsec_cli_fanout"
FORWARD = "whsec_" + "Y2xpLWZhbm91dC1mb3J3YXJkLXNlY3JldA=="


def _file(tmp_path, destinations, name="routes.json"):
    path = tmp_path / name
    path.write_text(json.dumps(destinations))
    return str(path)


ROUTES = [{"name": "invoices", "url": SINK, "secret": FORWARD,
           "filter": {"event_types": ["invoice.*"]}, "retry_statuses": [404]},
          {"name": "payments", "url": OTHER, "max_in_flight": 2,
           "filter": {"event_types": ["payment_intent.*"]}}]


def _show(database_url, name="routed"):
    shown = cli(database_url, "source", "show", "--tenant", "acme", name)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_create_and_update_take_a_destinations_file(database_url, gw_app, op, tmp_path):
    made = cli(database_url, "source", "create", "--tenant", "acme", "--name", "routed",
               "--provider", "stripe", "--secret", "-",
               "--destinations", _file(tmp_path, ROUTES), stdin=SIGNING)
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip().startswith("/hooks/")
    shown = _show(database_url)
    assert [(d["name"], d["url"], d["has_secret"], d["filter"], d["max_in_flight"])
            for d in shown["destinations"]] == [
        ("invoices", SINK, True, {"event_types": ["invoice.*"]}, shown["max_in_flight"]),
        ("payments", OTHER, False, {"event_types": ["payment_intent.*"]}, 2)]
    assert shown["destination"]["url"] == SINK  # the first, as the API shows it
    assert shown["destinations"][0]["retry_statuses"] == [404]
    assert FORWARD not in json.dumps(shown) and SIGNING not in json.dumps(shown)

    # update: the list matched by name; a new name is added, the others are replaced
    later = [ROUTES[0] | {"filter": None},
             {"name": "everything-else", "url": OTHER,
              "filter": {"event_types": ["customer.*"]}}]
    moved = cli(database_url, "source", "update", "routed", "--tenant", "acme",
                "--destinations", "-", stdin=json.dumps(later))
    assert moved.returncode == 0, moved.stderr
    assert [(d["name"], d["filter"]) for d in json.loads(moved.stdout)["destinations"]] == [
        ("invoices", None), ("everything-else", {"event_types": ["customer.*"]})]
    assert [d["name"] for d in _show(database_url)["destinations"]] == [
        "invoices", "everything-else"]


def test_the_signing_secret_then_the_file_from_stdin(database_url, gw_app, op):
    made = cli(database_url, "source", "create", "--tenant", "acme", "--name", "piped",
               "--provider", "stripe", "--secret", "-", "--destinations", "-",
               stdin=SIGNING + "\n" + json.dumps(ROUTES))
    assert made.returncode == 0, made.stderr
    assert [d["name"] for d in _show(database_url, "piped")["destinations"]] == [
        "invoices", "payments"]


def test_what_the_file_cannot_be_is_refused_and_changes_nothing(database_url, gw_app, op,
                                                                tmp_path):
    base = ("source", "create", "--tenant", "acme", "--name", "bad", "--provider", "stripe",
            "--secret", SIGNING)
    secret_text = "whsec_" + "c2VjcmV0LW5vdC10by1iZS1lY2hvZWQ="
    cases = [
        # (extra arguments, exit code, what stderr says)
        ((), 2, "give --destination URL, or --destinations FILE"),
        (("--destination", SINK, "--destinations", _file(tmp_path, ROUTES)), 2,
         "--destination goes in the --destinations file"),
        (("--destinations", _file(tmp_path, ROUTES), "--filter", "{}"), 2,
         "--filter goes in the --destinations file"),
        (("--destinations", _file(tmp_path, ROUTES), "--rate", "1/s"), 2,
         "--rate goes in the --destinations file"),
        (("--destinations", str(tmp_path / "absent.json")), 2, "cannot read it"),
        (("--destinations", str(tmp_path)), 2, "cannot read it"),
        (("--destinations", _file(tmp_path, [], "empty.json")), 1, "destinations"),
        (("--destinations", _write(tmp_path, '[{"name": "a", "secret": "%s", ' % secret_text)),
         2, "not JSON"),
        (("--destinations", _write(tmp_path, '[{"name": "a", "name": "b"}]')), 2,
         "duplicate member name"),
        (("--destinations", _write(tmp_path, " " * (1 << 20) + "[]")), 2, "larger than 1 MiB"),
        (("--destinations", _file(tmp_path, [ROUTES[0], ROUTES[0]], "twice.json")), 1,
         "destinations[1].name"),
        (("--destinations", _file(tmp_path, [ROUTES[0] | {"url": "http://169.254.169.254/"}],
                                  "metadata.json")), 1, "destinations.0.url: the destination resolves"),
        (("--destinations", _file(tmp_path, [ROUTES[0] | {"name": f"d{i}"}
                                             for i in range(11)], "eleven.json")), 1,
         "destinations"),
    ]
    for extra, code, said in cases:
        refused = cli(database_url, *base, *extra)
        assert (refused.returncode, said in refused.stderr) == (code, True), (extra,
                                                                             refused.stderr)
        assert "Traceback" not in refused.stderr and secret_text not in refused.stderr
    listed = cli(database_url, "source", "list", "--tenant", "acme")
    assert "bad\t" not in listed.stdout  # nothing was created


def _write(tmp_path, text: str) -> str:
    path = tmp_path / f"raw-{abs(hash(text))}.json"
    path.write_text(text)
    return str(path)


def test_deliveries_and_redeliver_name_a_destination(database_url, gw, forwarding, tmp_path):
    """`keystore deliveries --destination` lists one destination's deliveries (each line
    names its destination); `keystore redeliver` of an event with several needs one, and
    queues only that delivery again."""
    sinks = [Sink(), Sink()]
    try:
        status, answer, _ = gw.post("/v1/sources", {
            "name": "shop", "provider": "testing", "secrets": [SECRET], "destinations": [
                {"name": "billing", "url": sinks[0].url},
                {"name": "crm", "url": sinks[1].url}]})
        assert status == 201, answer
        body = json.dumps({"id": "ev1", "type": "invoice.paid"}).encode()
        assert deliver(gw, answer["source"], body, event_id="ev1")[0] == 202
        assert sorted(pump(forwarding)) == ["delivered", "delivered"]

        listed = cli(database_url, "deliveries", "--tenant", "acme", "--source", "shop",
                     "--destination", "crm")
        assert listed.returncode == 0, listed.stderr
        lines = [json.loads(line) for line in listed.stdout.splitlines()]
        assert [(d["event_id"], d["destination"], d["state"]) for d in lines] == [
            ("ev1", "crm", "delivered")]

        base = ("redeliver", "--tenant", "acme", "--source", "shop", "--event-id", "ev1",
                "--force")
        unnamed = cli(database_url, *base)
        assert unnamed.returncode == 1 and "destination" in unnamed.stderr, unnamed.stderr
        for bad, said in (("nobody", "nobody"), ("a\r\nInjected: 1", "destination")):
            refused = cli(database_url, *base, "--destination", bad)
            assert refused.returncode == 1 and said in refused.stderr, refused.stderr
            assert "Injected" not in refused.stderr and "Traceback" not in refused.stderr
        again = cli(database_url, *base, "--destination", "crm")
        assert again.returncode == 0, again.stderr
        assert pump(forwarding) == ["delivered"]
        assert [len(s.requests) for s in sinks] == [1, 2]  # billing's was not sent again
    finally:
        for s in sinks:
            s.close()
