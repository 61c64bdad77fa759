"""`keystore source create`'s options, in the groups they form: the destination's forwards, the
generic provider's scheme and the source's limits. Each group is one small dataclass that
`body()` turns into its part of the API's SourceCreate body (docs/webhooks/README.md).

click has no argument groups (as argparse has); `grouped` gives one: it declares a group's
options and hands the command one dataclass of their values instead of one argument each."""
from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable
from typing import Any, Optional

import click

from keystore_service.cli.params import Whole
from keystore_service.domain import canonical


def grouped(into: str, cls: type, *options: Callable) -> Callable:
    """Declare `options` (in the order shown in --help) and pass the command, as `into`, one
    `cls` made of their values (its fields are named as the options' parameters)."""
    names = [field.name for field in dataclasses.fields(cls)]

    def decorate(command: Callable) -> Callable:
        def with_group(**given: Any) -> Any:
            given[into] = cls(**{name: given.pop(name) for name in names})
            return command(**given)
        with_group.__name__ = command.__name__
        with_group.__doc__ = command.__doc__
        # the options declared below this one stay below it in --help
        with_group.__click_params__ = list(getattr(command, "__click_params__", []))
        for option in reversed(options):
            with_group = option(with_group)
        return with_group
    return decorate


def stdin_if_dash(value: str) -> str:
    """A secret given as '-' is read from stdin's next line (never from the command line)."""
    return sys.stdin.readline().strip() if value == "-" else value


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep:
        raise click.BadParameter("a header is 'Name: value'", param_hint="--header")
    return name.strip(), value.strip()


@dataclasses.dataclass(frozen=True)
class Forward:
    """Where and how each event is forwarded: the workflow's URL and what a forward carries."""

    destination: Optional[str]
    headers: tuple[str, ...]
    destination_secret: Optional[str]
    timeout: int
    retry_statuses: tuple[int, ...]
    delivered_header: Optional[str]
    rate: Optional[str] = None  # 10/s or 600/min, read by body()
    filter: Optional[str] = None  # JSON text, read by body()
    ordering: Optional[str] = None  # a mode, or the whole ordering as JSON text
    ordering_key: Optional[str] = None  # with a mode: the key's pointer
    ordering_version: Optional[str] = None  # with a mode: the version's pointer
    destinations: Optional[str] = None  # a JSON file of the API's destinations, read by part()

    def part(self) -> dict[str, Any]:
        """The body's "destination" (with its secret, '-' read from stdin) or, for
        --destinations FILE, its "destinations"; click.UsageError for neither or both, and
        for a destination's own options beside --destinations (the file holds them)."""
        if self.destinations is None:
            if self.destination is None:
                raise click.UsageError("give --destination URL, or --destinations FILE")
            out = self.body()
            if self.destination_secret:
                out["secret"] = stdin_if_dash(self.destination_secret)
            return {"destination": out}
        given = [flag for flag, value in self._own() if value not in (None, (), 10)]
        if given:
            raise click.UsageError(f"{given[0]} goes in the --destinations file, "
                                   "in each destination's own settings")
        return {"destinations": _json_file(self.destinations)}

    def _own(self) -> tuple[tuple[str, Any], ...]:
        """The one destination's options, by their flags, as given."""
        return (("--destination", self.destination), ("--header", self.headers),
                ("--destination-secret", self.destination_secret), ("--timeout", self.timeout),
                ("--retry-status", self.retry_statuses),
                ("--delivered-header", self.delivered_header), ("--rate", self.rate),
                ("--filter", self.filter), ("--ordering", self.ordering),
                ("--ordering-key", self.ordering_key),
                ("--ordering-version", self.ordering_version))

    def body(self) -> dict[str, Any]:
        """The body's "destination" without its secret; raises click.BadParameter for a
        header without ':' or a --filter that is not JSON (the API's rules check the rest)."""
        out = {"url": self.destination, "timeout_seconds": self.timeout,
               "headers": dict(_header(h) for h in self.headers),
               "retry_statuses": list(self.retry_statuses),
               "delivered_header": self.delivered_header}
        if self.rate is not None:
            out["rate"] = _rate_option(self.rate)
        if self.filter is not None:
            out["filter"] = _json_option(self.filter, "--filter")
        ordering = self._ordering()
        if ordering is not None:
            out["ordering"] = ordering
        return out

    def _ordering(self) -> Any:
        """--ordering as JSON ('{"key": ...}'), or a mode with --ordering-key and
        --ordering-version; None without --ordering. click.BadParameter when the parts do
        not go together (the API's rules check the rest)."""
        parts = {"key": self.ordering_key, "version": self.ordering_version}
        if self.ordering is None:
            if any(v is not None for v in parts.values()):
                raise click.BadParameter("give --ordering (serial or newer_wins) too",
                                         param_hint="--ordering-key/--ordering-version")
            return None
        if self.ordering.lstrip().startswith("{"):
            if any(v is not None for v in parts.values()):
                raise click.BadParameter("a JSON ordering already names its key and version",
                                         param_hint="--ordering")
            return _json_option(self.ordering, "--ordering")
        return {"mode": self.ordering, **{k: v for k, v in parts.items() if v is not None}}


_RATE = re.compile(r"([0-9]+)/(s|min)")
_RATE_UNITS = {"s": "per_second", "min": "per_minute"}


def _rate_option(text: str) -> dict[str, int]:
    """--rate N/s or N/min as the API's destination.rate; click.BadParameter for another
    form (the API's rules check the number)."""
    found = _RATE.fullmatch(text.strip())
    if found is None:
        raise click.BadParameter("a rate is N/s or N/min, e.g. 10/s or 600/min",
                                 param_hint="--rate")
    return {_RATE_UNITS[found[2]]: int(found[1])}


def _json_option(text: str, hint: str) -> Any:
    """An option's JSON text as its value, read as strictly as the API reads a body (no
    NaN, no name twice, no lone surrogate); click.BadParameter with the reason and place,
    never the text."""
    try:
        return canonical.parse_json_value(text.encode("utf-8", "surrogateescape"))
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint=hint) from None


_MOST_BYTES = 1 << 20  # far above 10 destinations at the API's limits


def _json_file(path: str) -> Any:
    """--destinations FILE ('-': the rest of stdin) as JSON, read as _json_option reads;
    click.BadParameter when it cannot be read or is too large (never its text)."""
    try:
        if path == "-":
            # text, as stdin_if_dash read the secrets before it (their buffer holds the rest)
            data = sys.stdin.read(_MOST_BYTES + 1).encode("utf-8", "surrogateescape")
        else:
            with open(path, "rb") as file:
                data = file.read(_MOST_BYTES + 1)
    except OSError as exc:
        raise click.BadParameter(f"cannot read it: {exc.strerror}",
                                 param_hint="--destinations") from None
    if len(data) > _MOST_BYTES:
        raise click.BadParameter("larger than 1 MiB", param_hint="--destinations")
    try:
        return canonical.parse_json_value(data)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--destinations") from None


FORWARD = (
    click.option("--destination", default=None,
                 help="The workflow's webhook URL (or --destinations)."),
    click.option("--header", "headers", multiple=True, help="'Name: value' for every forward."),
    click.option("--destination-secret", default=None,
                 help="whsec_...: sign forwards (Standard Webhooks); '-' reads stdin."),
    click.option("--timeout", type=Whole(1, 60), default=10, show_default=True),
    click.option("--retry-status", "retry_statuses", type=Whole(400, 499),
                 multiple=True, help="A 4xx answer to retry too (n8n while it starts: 404)."),
    click.option("--delivered-header", default=None,
                 help="A 2xx counts as delivered only with this header in the answer."),
    click.option("--rate", default=None, metavar="N/s|N/min",
                 help="At most N forwards a second (10/s) or a minute (600/min), held across "
                      "relays; without it: as fast as --max-in-flight lets."),
    click.option("--filter", default=None, metavar="JSON",
                 help='Which events it takes, e.g. \'{"event_types": ["invoice.*"]}\' '
                      '(docs/webhooks/README.md); without it: every event.'),
    click.option("--ordering", default=None, metavar="MODE|JSON",
                 help="serial (with --ordering-key), newer_wins (with --ordering-key and "
                      "--ordering-version), or the whole "
                      'ordering as JSON, e.g. \'{"key": "/data/object/id", "mode": '
                      '"newer_wins", "version": "/created"}\'; without it: none.'),
    click.option("--ordering-key", default=None, metavar="POINTER",
                 help="The key an ordering compares within, e.g. /data/object/id."),
    click.option("--ordering-version", default=None, metavar="POINTER",
                 help="The version newer_wins compares, e.g. /created."),
    click.option("--destinations", default=None, metavar="FILE",
                 help="Several destinations instead of --destination: a JSON file of the "
                      "API's destinations list, each with its name, url and own settings "
                      "(secret too); '-' reads it from stdin, after the signing secrets."),
)


@dataclasses.dataclass(frozen=True)
class Generic:
    """The generic provider's scheme: how a request is verified and what identifies its event."""

    signature_header: Optional[str]
    signature_algorithm: str
    signature_encoding: str
    signature_prefix: str
    event_id_header: Optional[str]
    event_id_json: tuple[str, ...]
    event_type_header: Optional[str] = None
    event_type_json: Optional[str] = None

    def body(self) -> dict[str, Any]:
        """The body's "signature" (None: unsigned), "event_id" and, when given,
        "event_type"; raises click.UsageError for both event-type options at once."""
        signature = None if self.signature_header is None else {
            "header": self.signature_header, "algorithm": self.signature_algorithm,
            "encoding": self.signature_encoding, "prefix": self.signature_prefix}
        event_id = ({"header": self.event_id_header} if self.event_id_header else
                    {"json": list(self.event_id_json)})
        out = {"signature": signature, "event_id": event_id}
        if self.event_type_header and self.event_type_json:
            raise click.UsageError("give --event-type-header or --event-type-json, not both")
        if self.event_type_header:
            out["event_type"] = {"header": self.event_type_header}
        elif self.event_type_json:
            out["event_type"] = {"json": self.event_type_json}
        return out


GENERIC = (
    click.option("--signature-header", default=None, help="generic: the signature's header"),
    click.option("--signature-algorithm", type=click.Choice(["sha256", "sha1"]),
                 default="sha256", show_default=True),
    click.option("--signature-encoding", type=click.Choice(["hex", "base64"]), default="hex",
                 show_default=True),
    click.option("--signature-prefix", default="", help="generic: e.g. 'sha256='"),
    click.option("--event-id-header", default=None, help="generic: the event id's header"),
    click.option("--event-id-json", multiple=True,
                 help="generic: a JSON pointer of the event id (repeat to join several)"),
    click.option("--event-type-header", default=None,
                 help="generic: the header holding the event's type"),
    click.option("--event-type-json", default=None,
                 help="generic: a JSON pointer of the event's type (e.g. /type)"),
)


@dataclasses.dataclass(frozen=True)
class Limits:
    """The source's bounds; None leaves the service's default."""

    ttl: Optional[int]
    retry_window: Optional[int]
    max_in_flight: Optional[int]
    max_pause: Optional[int]

    def body(self) -> dict[str, int]:
        given = (("ttl_seconds", self.ttl), ("retry_window_seconds", self.retry_window),
                 ("max_in_flight", self.max_in_flight), ("max_pause_seconds", self.max_pause))
        return {key: value for key, value in given if value is not None}


LIMITS = (
    click.option("--ttl", type=Whole(1), default=None),
    click.option("--retry-window", type=Whole(1), default=None),
    click.option("--max-in-flight", type=Whole(1), default=None),
    click.option("--max-pause", type=Whole(1, 86400), default=None,
                 help="Seconds a destination's Retry-After may pause it, at most "
                      "(default 3600)."),
)


def source_body(name: str, provider: str, secrets: tuple[str, ...], forward: Forward,
                generic: Generic, limits: Limits) -> dict[str, Any]:
    """The API's SourceCreate body of the options; secrets given as '-' are read from stdin
    (the signing secrets first, then the destination's)."""
    body: dict[str, Any] = {"name": name, "provider": provider}
    if secrets:
        body["secrets"] = [stdin_if_dash(s) for s in secrets]
    body.update(forward.part())
    if provider == "generic":
        body.update(generic.body())
    body.update(limits.body())
    return body
