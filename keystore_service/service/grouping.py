"""Group commit: the claims a worker's threads make at the same time go as one statement.

Leader/follower, no timer. A claim that finds no group in flight goes at once, alone; claims
that arrive while a group's statement is in flight queue up, and when it has committed the
first of them leads the next group: everything queued by then (up to `limit`), as one
multi-row statement and one commit. Each member gets its own row back, exactly what its own
statement would have returned, and goes on alone from there (the slow path, when no row came
back, is each member's own). So a lone claim waits for nothing, and under load one round trip
and one commit serve many claims (bench/NOTES.md, "Group commit and thread layouts").

- A key already in the group waits for the next one: one INSERT ... ON CONFLICT DO UPDATE
  cannot touch a row twice.
- A database outage fails the whole group: each member takes its own outage path (a claim
  repeated through an outage recognises its own write by its lease token's hash).
- Any other failure of the group statement: each member sends its own statement instead, so
  one bad row cannot fail its neighbours.
"""
from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any, Generic, Optional, TypeVar

from keystore_service import errors

log = logging.getLogger("keystore.grouping")
Item = TypeVar("Item")
Answer = TypeVar("Answer")
# Members of one group: a worker has fewer threads than this unless configured otherwise, and
# each size is one prepared statement on the database's side.
LIMIT = 32


class _Member:
    __slots__ = ("key", "item", "ready", "answer", "error", "lead", "alone")

    def __init__(self, key: Hashable, item: Any):
        self.key, self.item = key, item
        self.ready = threading.Event()
        self.answer: Any = None
        self.error: Optional[BaseException] = None
        self.lead: Optional[list[_Member]] = None  # set when this member leads the next group
        self.alone = False  # the group failed: send your own statement


class Groups(Generic[Item, Answer]):
    """`submit(key, item)` answers what `many([items])[key]` would, sending concurrent
    submits together. `many` returns answers by key (a key may be missing: None is its
    answer); `one` sends a single item on its own, when a group's statement failed."""

    def __init__(self, many: Callable[[list[Item]], dict[Hashable, Answer]],
                 one: Callable[[Item], Optional[Answer]], limit: int = LIMIT,
                 sent: Callable[[int], None] = lambda size: None):
        self._many, self._one, self.limit, self._sent = many, one, limit, sent
        self._lock = threading.Lock()
        self._queue: deque[_Member] = deque()
        self._in_flight = False
        self.groups = 0  # statements sent, and the claims they carried (for the metrics)
        self.members = 0
        self.failed = 0  # group statements that failed other than by an outage

    def submit(self, key: Hashable, item: Item) -> Optional[Answer]:
        me = _Member(key, item)
        with self._lock:
            if self._in_flight:
                self._queue.append(me)
                group = None
            else:
                self._in_flight = True
                group = [me]
        if group is None:
            me.ready.wait()
            group = me.lead
        if group is not None:
            self._send(group)
        if me.alone:
            return self._one(item)
        if me.error is not None:
            raise me.error
        return me.answer

    def _send(self, group: list[_Member]) -> None:
        """Send one group's statement, hand leadership on, then wake the members."""
        try:
            answers = self._many([m.item for m in group])
        except errors.Unavailable as exc:  # the whole group's outcome is unknown
            for m in group:
                m.error = exc
        except Exception as exc:  # noqa: BLE001 - each member tries alone, meets its own error
            log.warning("a group of %d claims failed (%s); each goes alone", len(group),
                        type(exc).__name__)
            with self._lock:
                self.failed += 1
            for m in group:
                m.alone = True
        else:
            for m in group:
                m.answer = answers.get(m.key)
        finally:
            self._hand_on()
            with self._lock:
                self.groups += 1
                self.members += len(group)
            self._sent(len(group))
            for m in group:
                m.ready.set()

    def _hand_on(self) -> None:
        """The first queued member leads the next group: everything queued (once per key),
        or nobody is in flight any more."""
        with self._lock:
            if not self._queue:
                self._in_flight = False
                return
            group, keys, later = [], set(), deque()
            while self._queue and len(group) < self.limit:
                m = self._queue.popleft()
                if m.key in keys:
                    later.append(m)  # a key twice: the next group
                else:
                    keys.add(m.key)
                    group.append(m)
            later.extend(self._queue)
            self._queue = later
            leader = group[0]
            leader.lead = group
        leader.ready.set()
