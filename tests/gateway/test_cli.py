"""The gateway's commands (`keystore source ...`, `keystore redeliver`) as an operator runs
them, against the same database as the service under test, on both backends."""
from __future__ import annotations

import json

from .support import SECRET, cli, create_source, deliver, pump


def test_a_source_made_on_the_command_line_keeps_its_forwarding_choices(
        database_url, gw_app, op, sink):
    made = cli(database_url, "source", "create", "--tenant", "acme", "--name", "n8n-shop",
               "--provider", "stripe", "--secret", "-", "--destination", sink.url,
               "--retry-status", "404", "--retry-status", "404", "--retry-status", "410",
               "--delivered-header", "X-Workflow-Done", "--public-url", "https://h.example",
               stdin="whsec_cli_test")
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("https://h.example/hooks/")
    shown = cli(database_url, "source", "show", "--tenant", "acme", "n8n-shop")
    assert shown.returncode == 0, shown.stderr
    dest = json.loads(shown.stdout)["destination"]
    assert dest["retry_statuses"] == [404, 410] and dest["delivered_header"] == "X-Workflow-Done"
    assert "whsec_cli_test" not in shown.stdout + shown.stderr + made.stderr

    for bad in (["--retry-status", "500"], ["--retry-status", "٤٠٤"],
                ["--delivered-header", "X-Bad\r\nInjected: 1"]):
        refused = cli(database_url, "source", "create", "--tenant", "acme", "--name", "other",
                      "--provider", "stripe", "--secret", "whsec_x", "--destination",
                      sink.url, *bad)
        assert refused.returncode != 0 and "Traceback" not in refused.stderr, bad
        assert "\r\nInjected" not in refused.stderr
    assert cli(database_url, "source", "show", "--tenant", "acme", "other").returncode != 0


def test_redeliver_on_the_command_line_names_its_own_option(database_url, gw, forwarding):
    source = create_source(gw, gw.token, "http://127.0.0.1:9/unused")
    assert cli(database_url, "redeliver", "--tenant", "acme", "--source", "shop",
               "--event-id", "evt_none").stderr.strip().endswith("no such event of this source")
    deliver(gw, source)
    assert pump(forwarding) == ["retry"]  # nothing listens on port 9
    busy = cli(database_url, "redeliver", "--tenant", "acme", "--source", "shop",
               "--event-id", "evt_1")
    assert busy.returncode == 1 and "queued or being forwarded" in busy.stderr
    assert SECRET not in busy.stderr


def test_a_delivered_event_is_redelivered_only_with_force(database_url, gw, sink, forwarding):
    deliver(gw, create_source(gw, gw.token, sink.url))
    assert pump(forwarding) == ["delivered"]
    refused = cli(database_url, "redeliver", "--tenant", "acme", "--source", "shop",
                  "--event-id", "evt_1")
    assert refused.returncode == 1
    assert "--force" in refused.stderr and "force: true" not in refused.stderr
    forced = cli(database_url, "redeliver", "--tenant", "acme", "--source", "shop",
                 "--event-id", "evt_1", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "'evt_1' of 'shop' is queued again" in forced.stderr
    assert gw.get("/v1/deliveries", event_id="evt_1")[1]["deliveries"][0]["state"] == "queued"


def test_both_secrets_can_come_on_stdin_one_line_each(database_url, gw_app, op, sink):
    """docs/webhooks/recipes.md pipes the signing secret and then the destination secret:
    `--secret -` reads the first line, `--destination-secret -` the next."""
    made = cli(database_url, "source", "create", "--tenant", "acme", "--name", "piped",
               "--provider", "stripe", "--secret", "-", "--destination", sink.url,
               "--destination-secret", "-",
               stdin="whsec_signing_line\nwhsec_ZGVzdGluYXRpb24tc2VjcmV0LWxpbmUtMzItYnl0ZXM=\n")
    assert made.returncode == 0, made.stderr
    shown = cli(database_url, "source", "show", "--tenant", "acme", "piped")
    assert json.loads(shown.stdout)["destination"]["has_secret"] is True
    assert json.loads(shown.stdout)["secrets"] == 1
    assert "whsec_" not in made.stdout + made.stderr + shown.stdout + shown.stderr
    short = cli(database_url, "source", "create", "--tenant", "acme", "--name", "short",
                "--provider", "stripe", "--secret", "-", "--destination", sink.url,
                "--destination-secret", "-", stdin="whsec_only_one_line\n")
    assert short.returncode != 0 and "Traceback" not in short.stderr, short.stderr
    assert "destination.secret" in short.stderr and "whsec_" not in short.stderr
    assert cli(database_url, "source", "show", "--tenant", "acme", "short").returncode != 0
