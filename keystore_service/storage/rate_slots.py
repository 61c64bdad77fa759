"""When a rate that held back events has room again (storage/take.py's GCRA, issue 29), as
the take's SQL reckons it: the relay looks again then."""
from __future__ import annotations

from dataclasses import fields
from typing import Optional

from keystore_service.domain.records import SECOND
from keystore_service.storage.sources import Source
from keystore_service.storage.take import _EVENT_DESTINATION, DESTINATION, ENDED

_INTERVAL, _TAT = ([f.name for f in fields(Source)].index(n)
                   for n in ("rate_interval_us", "rate_tat"))


def burst(interval: int) -> int:
    """A rate's burst as the take's SQL reckons it: one second's worth, at least 1."""
    return 1 if interval >= SECOND else (SECOND + interval // 2) // interval


def next_slot(sources: list[tuple], candidates: list[list], leased: list[tuple], now: int
              ) -> Optional[int]:
    """When the earliest destination whose rate held back some of its candidates in this take
    has room again; None when no rate held any (the limit or max_in_flight did, or nothing
    was left). Mirrors the lease's SQL: the destination's new arrival time less its burst's
    tolerance, which is after `now`."""
    kind_of = {row[0]: row[2] for row in candidates}
    offered: dict[int, int] = {}
    for _, sid, kind, _ in candidates:
        if kind != ENDED:
            offered[sid] = offered.get(sid, 0) + 1
    taken: dict[int, int] = {}
    for row in leased:
        if kind_of[row[0]] != ENDED:
            taken[row[_EVENT_DESTINATION]] = taken.get(row[_EVENT_DESTINATION], 0) + 1
    slots = []
    for row in sources:
        interval, k = row[_INTERVAL], taken.get(row[DESTINATION], 0)
        if interval is None or k >= offered.get(row[DESTINATION], 0):
            continue
        tat = max(row[_TAT] or now, now)
        debt_slots = -(-(tat - now) // interval)  # rounded up, as the SQL's
        if k < burst(interval) - debt_slots:
            continue  # the rate had room for more: something else held them
        slots.append(tat + k * interval - (burst(interval) - 1) * interval)
    return min(slots, default=None)
