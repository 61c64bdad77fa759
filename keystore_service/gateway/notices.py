"""What a notice says, per kind of channel: Slack's (and Mattermost's) `{"text": ...}`, a
webhook channel's `{"type", "issue"}` signed per Standard Webhooks, and an email's subject
and text. Pure: the sender (alerts.py) sends what these make."""
from __future__ import annotations

import json
from typing import Any, Optional

from keystore_service.domain import issues as words
from keystore_service.gateway.providers import standard

WHAT = {"opened": "opened", "resolved": "resolved", "reminder": "still open"}


def idempotency_key(notice: Any) -> str:
    """The issue's id and event (a reminder: and its number): the same at every retry."""
    if notice.issue_id is None:
        return f"{notice.event}-{notice.id}"
    suffix = f"-{notice.seq}" if notice.event == "reminder" else ""
    return f"issue-{notice.issue_id}-{notice.event}{suffix}"


def line(event: str, body: dict) -> str:
    """One line of text about the notice."""
    if event == "test":
        return f"Test notice from the key store to channel {body.get('channel')}: it works."
    if event == "more":
        return (f"{body['count']} more issue notice(s) were held back this hour "
                f"(at most {words.NOTICES_PER_HOUR} per channel per hour): "
                f"{', '.join(body.get('kinds', []))}. See {body.get('url', '/ui/issues')}")
    if event == "report":
        return body["text"]
    issue = body
    text = (f"Issue {WHAT.get(event, event)}: {issue['kind']} {issue['subject']}"
            f" (#{issue['id']}, count {issue['count']})")
    if issue.get("detail") and event != "resolved":
        text += f": {issue['detail']}"
    return f"{text}. {issue['url']}"


def slack(event: str, body: dict) -> bytes:
    return json.dumps({"text": line(event, body)}).encode()


def webhook(event: str, body: dict, msg_id: str, secret: Optional[str],
            timestamp: int) -> tuple[bytes, dict[str, str]]:
    """The body and its Standard Webhooks headers (none without a secret)."""
    payload: dict[str, Any] = {"type": words.event_type(event)}
    if event in ("test", "more", "report"):
        payload["data"] = body
        payload["issue"] = None
    else:
        payload["issue"] = body
    raw = json.dumps(payload).encode()
    return raw, standard.sign(secret, msg_id, timestamp, raw) if secret else {}


def email(event: str, body: dict) -> tuple[str, str]:
    """The subject (one line, no CR/LF whatever the issue's text) and the text."""
    text = line(event, body)
    subject = "[keystore] " + text.split(". http")[0][:150]
    return " ".join(subject.split()), text + "\n"
