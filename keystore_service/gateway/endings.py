"""What an attempt's end means beyond its outcome (gateway/forwarding.py settles it): the
record's result, the source's last error, whether it says the destination is down, and
when its event's retry window ends."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from keystore_service.gateway import ordering, rules
from keystore_service.gateway.rules import Outcome

if TYPE_CHECKING:
    from keystore_service.domain.records import Micros
    from keystore_service.storage.events import Event
    from keystore_service.storage.sources import Source

# An attempt's error when its event's window ended during a pause ("the destination ...":
# final, see final()).
PAUSED_PAST_WINDOW = "the destination's pause outlasted the retry window"
# The errors of attempts that made no forward: they say nothing of the destination.
NOT_TRIED = frozenset({PAUSED_PAST_WINDOW, "the body is no longer kept",
                       "the lease ran out before the forward"})
UNSENT = frozenset({Outcome.FILTERED, Outcome.SUPERSEDED})  # settled without a forward
ENDS_WELL = frozenset({Outcome.DELIVERED, *UNSENT})  # the record succeeds


def ending(outcome: Outcome, result: Any) -> str:
    """The record's result once the event is delivered, filtered, superseded or given up
    (`result` a forwarding.Result)."""
    if outcome is Outcome.FILTERED:
        return rules.filtered_result()
    if outcome is Outcome.SUPERSEDED:
        return ordering.superseded_result(result.by)
    return rules.result_of(result.status, result.answer,
                           None if outcome is Outcome.DELIVERED else result.error)


def reason(outcome: Outcome, result: Any) -> Optional[str]:
    """The source's last error after this attempt: None when it was delivered."""
    if outcome is Outcome.DELIVERED:
        return None
    return result.error or f"HTTP {result.status}" + (
        "" if result.marked else " without the delivered header")


def down(outcome: Outcome, result: Any) -> bool:
    """The attempt says the destination fails: no answer (a refused connection, a
    timeout), or an answer that is retried or a 5xx."""
    if outcome is Outcome.DELIVERED or result.error in NOT_TRIED:
        return False
    if result.status is None:
        return not final(result.error or "")
    return outcome is Outcome.RETRY or result.status >= 500


def final(error: str) -> bool:
    """An error that no retry can mend (a refused destination, a body that is gone)."""
    return error.startswith("the destination") or error.startswith("the body")


def window_end(event: Event, source: Source) -> Micros:
    """The end of the event's retry window, later by the part of the source's operator
    pause (on, or ended and not cleared yet) that fell within it: a pause until resumed
    holds it open (storage/pauses.py adds the pause's length when it is cleared)."""
    end = rules.window_end(event.window_start, source.retry_window_seconds)
    began, until = source.operator_paused_at, source.operator_paused_until
    if began is None:
        return end
    if until is None:
        return 2 ** 63 - 1
    return end + max(0, until - max(began, event.window_start))
