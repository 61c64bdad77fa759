"""Configuration from the environment (prefix KEYSTORE_): the only reader of os.environ."""
from __future__ import annotations

import ipaddress
from typing import Literal, Optional

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

HOUR = 3600
# Size the TTL from the sender's retry window plus a margin: a sender that resends for 48 h
# needs at least 48 h; 72 h also covers a weekend of a paused workflow being switched back on.
DEFAULT_TTL_SECONDS = 72 * HOUR
MAX_TTL_SECONDS = 90 * 24 * HOUR  # docs/api.md's 7,776,000 s
DEFAULT_LEASE_SECONDS = 300  # a side effect that takes longer extends its lease
MAX_LEASE_SECONDS = 24 * HOUR
MIB = 1024 * 1024


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KEYSTORE_", extra="ignore", frozen=True)

    database_url: str = "sqlite:///keystore.db"
    default_ttl_seconds: int = Field(DEFAULT_TTL_SECONDS, ge=1, le=MAX_TTL_SECONDS)
    default_lease_seconds: int = Field(DEFAULT_LEASE_SECONDS, ge=1, le=MAX_LEASE_SECONDS)
    max_body_bytes: int = Field(MIB, ge=1024, le=64 * MIB)
    pool_size: int = Field(8, ge=1, le=200)
    # WAL + NORMAL survives a killed process (each commit is in the WAL file); only a power
    # loss or OS crash can undo the last commits. FULL fsyncs every commit.
    sqlite_synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    sqlite_busy_timeout_ms: int = Field(5000, ge=0, le=600_000)
    token_cache_seconds: float = Field(5.0, ge=0, le=300)
    access_log: bool = False
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # Background jobs in the service (0 turns one off); `keystore reconcile` / `sweep` also
    # run them by hand or from cron.
    reconcile_interval_seconds: float = Field(30, ge=0, le=86_400)
    sweep_interval_seconds: float = Field(300, ge=0, le=86_400)
    # Retention after expiry: finished and released records go at once by default (they
    # count as absent anyway); records with an open review wait for a person, up to 30 days.
    keep_finished_seconds: int = Field(0, ge=0, le=MAX_TTL_SECONDS)
    keep_unresolved_seconds: int = Field(30 * 24 * HOUR, ge=0, le=MAX_TTL_SECONDS)
    # The daily report's counts of purged records: 400 days covers a year-over-year look at
    # the same month; the sweeper purges older days. (Ten years at most: a bounded table.)
    keep_report_days: int = Field(400, ge=1, le=3660)
    # Resolved issues and the notices that are done (sent, given up) go this long after they
    # were resolved or made: a quarter of history on the Issues page, and a flapping
    # destination cannot grow the tables for ever (storage/alert_history.py).
    keep_issues_days: int = Field(90, ge=1, le=3660)
    # Per-token rate limit: requests per window, counted across all workers and instances in
    # the database (one extra statement per request while on). 0 = off (the default).
    rate_limit_requests: int = Field(0, ge=0, le=10_000_000)
    rate_limit_window_seconds: int = Field(60, ge=1, le=3600)
    # Late repeats (contract v1.1): a finished record leaves a trace when the sweeper purges
    # it; a claim that acquires the key again with the same fingerprint within this long after
    # its expiry is a late repeat (marked, or held for a person with on_late_repeat=review).
    # 90 days: a quarter, beyond any provider's retries and most manual re-sends. 0: off.
    late_repeat_window_seconds: int = Field(90 * 24 * HOUR, ge=0, le=10 * 365 * 24 * HOUR)
    # Scopes whose claims keep their payload for the review page as if they asked
    # (keep_payload), comma-separated; "*": every scope. Empty: only claims that ask.
    keep_payload_scopes: str = ""
    # The operators' page (/ui/): signed out after this long without a request; the session
    # cookie is Secure when the request came over https, or always with ui_cookie_secure
    # (set it when a proxy in front terminates TLS and forwards plain http).
    ui_idle_minutes: float = Field(15, gt=0, le=24 * 60)
    ui_cookie_secure: bool = False
    # Peers trusted to say who the client is (X-Forwarded-For, for the access log) and that
    # it came over https (X-Forwarded-Proto, for the page's Secure cookie): the reverse
    # proxy's address(es) or networks, comma-separated, or "*". Loopback by default, as
    # gunicorn's own default: a proxy on the same host (docs/deployment.md).
    forwarded_allow_ips: str = "127.0.0.1,::1"
    # Group commit (bench/NOTES.md): claims that a worker's threads make at the same time
    # go to the database as one statement and one commit (and on SQLite the webhook events
    # they accept at the same time, one transaction); a lone claim still goes at once.
    group_commit: bool = True
    # Repeats answered replay or in_progress counted after the answer, by each worker in one
    # statement a second (docs/api.md, "Repeats counted later"): a repeat costs a read.
    async_repeat_counts: bool = False
    metrics_max_scopes: int = Field(100, ge=1, le=10_000)
    # Requests that wait (GET /v1/keys?wait=) may hold this share of a worker's threads (never
    # all of them), and one token this share of those seats; past either, the request is
    # answered at once with Retry-After. A waiting request holds a thread for up to 30 s.
    wait_share: float = Field(0.5, ge=0, le=1)
    wait_token_share: float = Field(0.5, gt=0, le=1)
    # The gateway (docs/webhooks/README.md). Fernet keys that seal sources' secrets (comma-separated:
    # the first seals, all open), or a file holding them; `keystore serve` on SQLite makes
    # <database>.key beside the database when neither is set.
    secret_key: Optional[SecretStr] = None
    secret_key_file: Optional[str] = None
    # The ingest URLs' scheme and host as providers reach them (behind a proxy); otherwise
    # the URL a source was created through.
    public_url: Optional[str] = None
    # Forwarding: events forwarded at once by each relay (each worker of `keystore serve`
    # runs one; `keystore relay` more), and whether serve runs its relays at all.
    relay_concurrency: int = Field(16, ge=1, le=256)
    relay_in_serve: bool = True
    # Bulk jobs (POST /v1/bulk): at most this many events a second per job, so a job over a
    # large backlog leaves the database to live traffic (0: as fast as the database answers).
    bulk_events_per_second: float = Field(0, ge=0, le=100_000)
    # Where outbound requests (forwards) may connect (gateway/destinations.py): `any` (loopback
    # and private addresses too: workflows run next door), `private` (loopback refused),
    # `public` (only globally routable addresses: tenants who do not trust each other). In
    # every mode a link-local or cloud-metadata address (169.254.0.0/16, fe80::/10,
    # fd00:ec2::254, 100.100.100.200) is refused unless hook_allow_link_local: a tenant's
    # operator chooses the URL, and it must not reach the host's metadata service.
    hook_destinations: Literal["any", "private", "public"] = "any"
    hook_allow_link_local: bool = False
    # Deliveries a source takes per second in each process before answering 429 (0: no
    # limit). Providers resend what was refused, so nothing is lost.
    hook_rate_limit_per_second: float = Field(200, ge=0, le=1_000_000)
    # Deliveries with a missing or wrong signature a source answers 401 per second in each
    # process; past it 429 (0: no limit). Apart from the rate above, which only signed
    # deliveries spend (issue 25, item 5); a sender with a wrong secret needs few 401s to
    # show it, and junk gets no more than this.
    hook_bad_signature_per_second: float = Field(10, ge=0, le=1_000_000)
    # Issues and alerts (docs/operations.md, "Issues"): email channels are sent through
    # smtp://[user:password@]host[:port][?starttls=true&from=ADDRESS] (smtps:// for TLS from
    # the start); unset, email channels are refused. The watchers look every
    # alert_watch_seconds (in each relay; the database decides between them), 0: never.
    smtp_url: Optional[SecretStr] = None
    alert_watch_seconds: float = Field(5, ge=0, le=3600)
    # Slow clients (issue 25, item 10): a request's line and headers must arrive within
    # header_timeout_seconds (of a new connection, or of the first byte of a kept-alive one's
    # next request), its body within body_timeout_seconds after that; slower connections
    # are closed (slow_clients.py). 10 s: docs/api.md's; an honest client sends a head (a
    # few KiB) in milliseconds. 30 s: the largest body taken (max_body_bytes, 1 MiB by
    # default) takes ~17 s over a slow 0.5 Mbit/s uplink, and a worker thread that a
    # trickled body holds is free again after at most this long.
    header_timeout_seconds: float = Field(10, gt=0, le=600)
    body_timeout_seconds: float = Field(30, gt=0, le=3600)
    # Benchmarks only: POST /bench/noop parses a JSON body and answers, through the same app
    # and server configuration, as the ceiling a claim is measured against (docs/benchmarks.md).
    bench_noop: bool = False

    @field_validator("database_url")
    @classmethod
    def _known_backend(cls, url: str) -> str:
        if not url.startswith(("sqlite:", "sqlite+pysqlite:", "postgresql:", "postgres:",
                               "postgresql+psycopg:")):
            raise ValueError("use sqlite:///PATH or postgresql://USER@HOST:PORT/DB")
        return url

    @field_validator("smtp_url")
    @classmethod
    def _smtp(cls, url: Optional[SecretStr]) -> Optional[SecretStr]:
        if url is not None and not url.get_secret_value().startswith(("smtp://", "smtps://")):
            raise ValueError("use smtp://[user:password@]host[:port][?starttls=true] or smtps://")
        return url

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _addresses(cls, spec: str) -> str:
        for item in spec.split(","):
            item = item.strip()
            if item and item != "*":
                try:
                    ipaddress.ip_network(item, strict=False)
                except ValueError:
                    raise ValueError("use IP addresses or networks, comma-separated, "
                                     "or *") from None
        return spec


def load(**overrides) -> Settings:
    """Settings from the environment; SystemExit with a clear message if they are invalid."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        lines = [f"  KEYSTORE_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']}"
                 for e in exc.errors()]
        raise SystemExit("keystore: invalid configuration:\n" + "\n".join(lines)) from None
