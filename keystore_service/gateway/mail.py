"""Email notices over SMTP with the standard library: KEYSTORE_SMTP_URL is
smtp://[user:password@]host[:port][?starttls=true&from=ADDRESS] (smtps:// for TLS from the
first byte). The SMTP server is the service's own configuration, not a tenant's choice, so
the destination rules do not apply to it; the recipient is one checked address (no CR/LF:
web/api/issue_schemas.EmailAddress) and the subject one line."""
from __future__ import annotations

import smtplib
import socket
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Optional
from urllib.parse import parse_qs, unquote, urlsplit

SMTP_SECONDS = 20  # the whole conversation (connect, TLS, login, message)


@dataclass(frozen=True, slots=True)
class SmtpServer:
    host: str
    port: int
    tls: bool  # smtps: TLS from the start
    starttls: bool
    user: Optional[str]
    password: Optional[str]
    sender: str


def parse(url: str) -> SmtpServer:
    """ValueError for a URL that is not smtp:// or smtps:// with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        raise ValueError("KEYSTORE_SMTP_URL is smtp://host[:port] or smtps://host[:port]")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    tls = parts.scheme == "smtps"
    sender = query.get("from") or f"keystore@{socket.getfqdn() or 'localhost'}"
    if "\r" in sender or "\n" in sender:
        raise ValueError("KEYSTORE_SMTP_URL's from= is one address")
    return SmtpServer(parts.hostname, parts.port or (465 if tls else 25), tls,
                      query.get("starttls", "").lower() in ("1", "true", "yes"),
                      unquote(parts.username) if parts.username else None,
                      unquote(parts.password) if parts.password else None, sender)


def send(server: SmtpServer, to: str, subject: str, text: str, key: str) -> Optional[str]:
    """Send one message; None when the server took it, else a short reason. `key` (the
    notice's idempotency key) goes in the Message-ID and an Idempotency-Key header."""
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = server.sender, to, subject
    msg["Date"] = formatdate(usegmt=True)
    msg["Message-ID"] = make_msgid(idstring=key.replace("@", "-"))
    msg["Idempotency-Key"] = key
    msg.set_content(text)
    try:
        kind = smtplib.SMTP_SSL if server.tls else smtplib.SMTP
        extra = {"context": ssl.create_default_context()} if server.tls else {}
        with kind(server.host, server.port, timeout=SMTP_SECONDS, **extra) as smtp:
            if server.starttls:
                smtp.starttls(context=ssl.create_default_context())
            if server.user:
                smtp.login(server.user, server.password or "")
            smtp.send_message(msg)
    except smtplib.SMTPResponseException as exc:
        return f"smtp {exc.smtp_code}"
    except (smtplib.SMTPException, OSError) as exc:
        return f"smtp: {type(exc).__name__}"
    return None
