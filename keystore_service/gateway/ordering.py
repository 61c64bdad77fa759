"""A destination's ordering per key (CONTRACT.md "Routing").

Both modes: each event's key is read from its body when it is accepted (held_key, kept in
hook_events.ordering_key with its mode in ordering_mode), and the take forwards one event of
a key at a time (storage/take.py); an event without a key (none at the pointer, a body that
is not JSON) is not held and holds none.

serial: an event also waits while an earlier one of its key is queued (for its retry too).

newer_wins: an event waits while an earlier one of its key is due, not while one waits for
its retry (which is then superseded at its turn if a newer one was delivered). At an
event's turn, after its filter, an event whose version is not newer than the last delivered
one of its key is `superseded` (nothing is sent); when one is delivered, its version becomes
the key's last, in the same transaction (storage/versions.py). What cannot be compared goes
out as before: an event without a key or a version, or with a version of another kind than
the stored one (routing.newer is None), is forwarded, never dropped unseen; so is every event
of a source whose stored ordering does not read (left by other limits)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Optional

from keystore_service.domain import canonical, route_specs
from keystore_service.domain.routing import (
    Ordering,
    OrderingMode,
    canonical_text,
    newer,
    ordering_key,
    read_json,
    version_of,
)

if TYPE_CHECKING:
    from keystore_service.storage.sources import Source


@dataclass(frozen=True, slots=True)
class Keyed:
    """An event's place in its destination's ordering: its key's digest and its version."""
    key: str
    version: Any
    text: str  # the version's canonical JSON, as hook_versions keeps it

    def newer_than(self, stored: str) -> Optional[bool]:
        """routing.newer of this version over a stored one (None: they cannot be compared)."""
        return newer(self.version, read_json(stored.encode("utf-8")))


def read_ordering(forward: dict) -> Optional[Ordering]:
    """The destination's stored ordering when it is newer_wins (the one the relay keeps);
    None without one, or for one that does not read: its events are forwarded."""
    given = forward.get("ordering")
    if given is None:
        return None
    try:
        parsed = route_specs.parse_ordering(given)
    except route_specs.RouteError:
        return None
    return parsed if parsed.mode is OrderingMode.NEWER_WINS else None


def held_key(source: Source, body: bytes) -> tuple[Optional[str], Optional[str]]:
    """The event's key digest (routing.ordering_key) and the mode it is held under
    (storage/take.py) when `source`'s destination orders `serial` or `newer_wins`; (None,
    None) otherwise, or without a key."""
    own = source.destination_config
    given = _ordering_of(source.config if own is None else own, own is not None)
    if given is None:
        return None, None
    key = ordering_key(body, given[0])
    return (key, given[1]) if key is not None else (None, None)


@lru_cache(maxsize=1024)
def _ordering_of(config: str, own: bool) -> Optional[tuple[str, str]]:
    """The key pointer and mode of the stored ordering (`config`: a destination's own
    forwarding options, or its source's options); None without one (or for one that does
    not read: its events are not held)."""
    options = json.loads(config)
    given = (options if own else options.get("forward", {})).get("ordering")
    try:
        parsed = route_specs.parse_ordering(given) if given is not None else None
    except route_specs.RouteError:
        return None
    return None if parsed is None else (parsed.key, parsed.mode.value)


def keyed(ordering: Optional[Ordering], body: Optional[bytes]) -> Optional[Keyed]:
    """The event's key and version under `ordering`; None when it has no ordering, no body
    (no longer kept), no key or no version: then it is not compared."""
    if ordering is None or body is None or ordering.version is None:
        return None
    key, version = ordering_key(body, ordering.key), version_of(body, ordering.version)
    if key is None or version is None:
        return None
    text = canonical_text(version)
    return None if text is None else Keyed(key, version, text)


def superseded_result(by: Optional[str]) -> str:
    """The record's result (canonical JSON) of a superseded event: the event id of the
    version delivered before it (null when that event is forgotten); nothing was sent."""
    return canonical.canonical({"superseded": True, "by": by}).decode("utf-8")
