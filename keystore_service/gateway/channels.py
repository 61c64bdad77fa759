"""Alert channels, as operators manage them: create, read, change, delete, and a test
notice. A channel's URL and secret are sealed like a source's secrets and never shown back
whole: an answer shows the URL's scheme and host only (`url_shown`) and whether a secret is
set. A URL is checked by the destination rules where it is given (and again by the one
outbound client where each notice connects)."""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from keystore_service import errors
from keystore_service.domain import issues as words
from keystore_service.domain.names import NAME
from keystore_service.domain.records import Micros
from keystore_service.gateway import destinations, providers
from keystore_service.gateway.outbound import Outbound
from keystore_service.service.sealing import Sealer
from keystore_service.storage.alerts import AlertStore, Channel



@dataclass(frozen=True, slots=True)
class ShownChannel:
    channel: Channel
    has_secret: Optional[bool]  # None when no configured key opens it


class Channels:
    def __init__(self, store: AlertStore, sealer: Sealer, outbound: Outbound,
                 clock: Callable[[], Micros], smtp_configured: bool):
        self.store, self.sealer, self.outbound, self.clock = store, sealer, outbound, clock
        self.smtp_configured = smtp_configured

    def create(self, tenant_id: int, body: Any) -> ShownChannel:
        """A channel from a validated ChannelCreate; InvalidRequest for what the schema
        cannot know (a refused URL, a field the kind does not take, a taken name)."""
        body = getattr(body, "root", body)  # ChannelCreate: one of its kinds
        url, secret, to = (getattr(body, f, None) for f in ("url", "secret", "to"))
        self._check(body.kind, url, secret, to)
        now = self.clock()
        sealed = self.sealer.seal({"url": url, "secret": secret})
        with self.store.transaction() as cur:
            if self.store.named(tenant_id, body.name, cur) is not None:
                raise errors.InvalidRequest(f"this tenant has a channel named {body.name!r} "
                                            "already", details={"field": "name"})
            channel = self.store.create(
                cur, tenant_id=tenant_id, name=body.name, kind=body.kind, sealed=sealed,
                shown=_shown(url), to_address=to, kinds=_kinds(body.kinds),
                remind_after_seconds=body.remind_after_seconds,
                daily_report=int(body.daily_report), report_day=None, held_since=None,
                created_at=now, updated_at=now)
        return self._shown(channel)

    def get(self, tenant_id: int, name: str) -> ShownChannel:
        return self._shown(self._named(tenant_id, name))

    def all(self, tenant_id: int) -> list[ShownChannel]:
        return [self._shown(c) for c in self.store.of_tenant(tenant_id)]

    def change(self, tenant_id: int, name: str, body: Any) -> ShownChannel:
        """PATCH: what is given changes (the name and kind do not)."""
        channel = self._named(tenant_id, name)
        given = body.model_fields_set
        changes: dict[str, Any] = {}
        if "url" in given or "secret" in given:
            try:
                opened = self.sealer.open(channel.sealed)
            except ValueError:
                opened = {"url": None, "secret": None}
            url = body.url if "url" in given else opened.get("url")
            secret = body.secret if "secret" in given else opened.get("secret")
            self._check(channel.kind, url, secret, channel.to_address, to_needed=False)
            changes |= {"sealed": self.sealer.seal({"url": url, "secret": secret}),
                        "shown": _shown(url)}
        if "to" in given:
            self._check(channel.kind, None, None, body.to, url_needed=False)
            changes["to_address"] = body.to
        if "kinds" in given:
            changes["kinds"] = _kinds(body.kinds)
        for field in ("remind_after_seconds", "daily_report"):
            if field in given and getattr(body, field) is not None:
                changes[field] = int(getattr(body, field))
        if changes:
            with self.store.transaction() as cur:
                self.store.change(cur, channel, changes, self.clock())
        return self._shown(self._named(tenant_id, name))

    def delete(self, tenant_id: int, name: str) -> ShownChannel:
        """Gone, with its notices not yet sent; the name may be used again."""
        channel = self._named(tenant_id, name)
        with self.store.transaction() as cur:
            self.store.delete(cur, channel)
        return self._shown(channel)

    def test(self, tenant_id: int, name: str) -> None:
        """A test notice, queued now (sent by the relay's sender within a second or two)."""
        channel = self._named(tenant_id, name)
        now = self.clock()
        with self.store.transaction() as cur:
            self.store.add_notice(cur, channel, None, "test", now,
                                  {"channel": channel.name}, now)

    def _named(self, tenant_id: int, name: str) -> Channel:
        channel = self.store.named(tenant_id, name) if NAME.fullmatch(name) else None
        if channel is None:
            raise errors.NotFound(f"no alert channel named {name!r}")
        return channel

    def _shown(self, channel: Channel) -> ShownChannel:
        try:
            secret = self.sealer.open(channel.sealed).get("secret")
        except ValueError:
            return ShownChannel(channel, None)
        return ShownChannel(channel, secret is not None)

    def _check(self, kind: str, url: Optional[str], secret: Optional[str], to: Optional[str],
               url_needed: bool = True, to_needed: bool = True) -> None:
        def refuse(field: str, message: str) -> None:
            raise errors.InvalidRequest(message, details={"field": field})
        if kind == "email":
            if url is not None or secret is not None:
                refuse("url", "an email channel has no url or secret: it is sent to `to`")
            if to is None and to_needed:
                refuse("to", "an email channel needs `to`, the address it is sent to")
            if not self.smtp_configured and to_needed:
                refuse("to", "this key store has no KEYSTORE_SMTP_URL: email cannot be sent")
            return
        if to is not None:
            refuse("to", f"a {kind} channel has no `to`: it is sent to its url")
        if kind == "slack" and secret is not None:
            refuse("secret", "a slack channel has no secret: its URL is the credential")
        if url is None:
            if url_needed:
                refuse("url", f"a {kind} channel needs its url")
            return
        try:
            self.outbound.check(url)
        except destinations.Refused as exc:
            refuse("url", str(exc))
        if secret is not None:
            try:
                providers.provider("standard").check_secret(secret)
            except providers.BadSecret as exc:
                refuse("secret", f"secret: {exc}")


def _shown(url: Optional[str]) -> Optional[str]:
    """What may be shown of a URL: its scheme and host (a Slack URL's path is its secret)."""
    if url is None:
        return None
    target = destinations.parse(url)
    return f"{target.scheme}://{target.host_header}/..."


def _kinds(kinds: Optional[list[str]]) -> Optional[str]:
    if kinds is None:
        return None
    unknown = sorted(set(kinds) - set(words.KINDS))
    if unknown:
        raise errors.InvalidRequest(f"unknown issue kinds: {', '.join(unknown)}",
                                    details={"field": "kinds"})
    return json.dumps(sorted(set(kinds)))
