"""Issues and alert channels: `keystore issue list|ack|resolve|ignore` and `keystore channel
create|list|delete|test` (docs/cli.md, docs/operations.md "Issues"). Like the other admin
commands they name their database on stderr and refuse one without the schema."""
from __future__ import annotations

import json
from typing import Optional

import click

from keystore_service.cli.common import TENANT, keystore, run, say, tenant, validated
from keystore_service.domain import issues as words
from keystore_service.web.api import issue_schemas
from keystore_service.web.api.render import rfc3339


@click.group("issue", help="What needs a person: issues opened by the watchers.")
def issue() -> None:
    pass


@issue.command("list", help="The tenant's issues, newest first (JSON lines).")
@TENANT
@click.option("--state", type=click.Choice(words.ISSUE_STATES), default=None)
@click.option("--kind", type=click.Choice(words.KINDS), default=None)
def issue_list(tenant_name: str, state: Optional[str], kind: Optional[str]) -> None:
    ks = keystore()
    for found in ks.gateway.issues.page(tenant(ks, tenant_name), state, kind):
        click.echo(json.dumps(ks.gateway.issues.json(found)))


def _act(action: str, done: str):
    @click.argument("issue_id", type=click.IntRange(1, 2 ** 63 - 1))
    @click.option("--by", default="cli", show_default=True, help="Who (for acknowledge).")
    @TENANT
    def command(issue_id: int, by: str, tenant_name: str) -> None:
        ks = keystore()
        run(lambda: ks.gateway.issues.act(tenant(ks, tenant_name), issue_id, action, by))
        say(f"keystore: issue {issue_id} {done}")
    return command


issue.command("ack", help="Acknowledge: reminders stop; it resolves by itself as before.")(
    _act("acknowledge", "acknowledged"))
issue.command("resolve", help="Resolve now (it opens again if its condition still holds).")(
    _act("resolve", "resolved"))
issue.command("ignore", help="Ignore until its condition clears (no other opens meanwhile).")(
    _act("ignore", "ignored"))


@click.group("channel", help="Where issues are told: Slack, a signed webhook, or email.")
def channel() -> None:
    pass


@channel.command("create", help="Create an alert channel.")
@TENANT
@click.option("--name", required=True)
@click.option("--kind", type=click.Choice(words.CHANNEL_KINDS), required=True)
@click.option("--url", default=None, help="slack or webhook: its URL; '-' reads it from stdin.")
@click.option("--secret", default=None, help="webhook: a whsec_ secret to sign with; '-' "
                                             "reads it from stdin.")
@click.option("--to", default=None, help="email: the address.")
@click.option("--kind-told", "kinds", multiple=True, type=click.Choice(words.KINDS),
              help="An issue kind to tell (repeat; default: all).")
@click.option("--remind-after", type=int, default=words.REMIND_DEFAULT, show_default=True,
              help="Seconds between reminders (0: never, else at least 5).")
@click.option("--daily-report", is_flag=True, help="Also send the daily report.")
def channel_create(tenant_name: str, name: str, kind: str, url: Optional[str],
                   secret: Optional[str], to: Optional[str], kinds: tuple[str, ...],
                   remind_after: int, daily_report: bool) -> None:
    ks = keystore()
    body = {"name": name, "kind": kind, "url": _stdin(url), "secret": _stdin(secret),
            "to": to, "kinds": list(kinds) or None, "remind_after_seconds": remind_after,
            "daily_report": daily_report}
    model = validated(issue_schemas.ChannelCreate, {k: v for k, v in body.items()
                                                 if v is not None})
    run(lambda: ks.gateway.channels.create(tenant(ks, tenant_name), model))
    say(f"keystore: created {kind} channel {name!r} for tenant {tenant_name!r}")


@channel.command("list", help="The tenant's channels (never their URLs' paths or secrets).")
@TENANT
def channel_list(tenant_name: str) -> None:
    ks = keystore()
    for shown in ks.gateway.channels.all(tenant(ks, tenant_name)):
        c = shown.channel
        click.echo(json.dumps({"name": c.name, "kind": c.kind, "url": c.shown,
                               "to": c.to_address, "kinds": c.kind_list,
                               "remind_after_seconds": c.remind_after_seconds,
                               "daily_report": bool(c.daily_report),
                               "created_at": rfc3339(c.created_at)}))


@channel.command("delete", help="Delete a channel and its notices not yet sent.")
@TENANT
@click.argument("name")
def channel_delete(tenant_name: str, name: str) -> None:
    ks = keystore()
    run(lambda: ks.gateway.channels.delete(tenant(ks, tenant_name), name))
    say(f"keystore: deleted channel {name!r}")


@channel.command("test", help="Send a test notice to the channel now.")
@TENANT
@click.argument("name")
def channel_test(tenant_name: str, name: str) -> None:
    ks = keystore()
    run(lambda: ks.gateway.channels.test(tenant(ks, tenant_name), name))
    ks.gateway.alerts.send_due()  # at once; a failed one is retried by the relays
    say(f"keystore: a test notice to channel {name!r} is sent (or queued, if the channel "
        "did not take it: `keystore serve` retries it)")


def _stdin(value: Optional[str]) -> Optional[str]:
    return click.get_text_stream("stdin").readline().strip() if value == "-" else value


COMMANDS = [issue, channel]
