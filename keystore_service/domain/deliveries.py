"""Where an accepted webhook event's forwarding is: the states of `hook_events.state`.

The values are the stored strings (and the API's and the command line's words), so the
table's CHECK, the SQL that names them and the JSON answers read the same text.
"""
from __future__ import annotations

from enum import StrEnum


class DeliveryState(StrEnum):
    QUEUED = "queued"  # waiting for its next attempt (next_attempt_at)
    DELIVERING = "delivering"  # leased to one relay worker until lease_until
    DELIVERED = "delivered"  # a destination took it (delivered_at)
    FAILED = "failed"  # given up: waits for a person to redeliver it
    FILTERED = "filtered"  # the destination's filter does not take it: nothing was sent
    SUPERSEDED = "superseded"  # a newer version of its key was delivered: nothing was sent


DELIVERY_STATES = tuple(s.value for s in DeliveryState)  # in order: the filters' choices
