"""Seats for waiting requests: a bounded share of a worker's threads, and of those per token."""
from __future__ import annotations

import threading

import pytest

from keystore_service.service.waiting import WaitSeats


@pytest.mark.parametrize("threads,share,token_share,seats,per_token", [
    (4, 0.5, 0.5, 2, 1), (16, 0.5, 0.5, 8, 4), (1, 0.5, 0.5, 0, 0), (2, 1.0, 1.0, 1, 1),
    (64, 0.25, 0.1, 16, 1), (4, 0, 0.5, 0, 0),
])
def test_seats_for_a_worker(threads, share, token_share, seats, per_token):
    w = WaitSeats.for_threads(threads, share, token_share)
    assert (w.per_worker, w.per_token) == (seats, per_token)


def test_a_token_cannot_take_every_seat_and_seats_come_back():
    w = WaitSeats(per_worker=3, per_token=2)
    with w.seat("a") as one, w.seat("a") as two, w.seat("a") as three:
        assert (one, two, three) == (True, True, False)
        with w.seat("b") as four, w.seat("c") as five:
            assert (four, five) == (True, False)  # the worker's seats are taken
    assert w.waiting == 0
    with w.seat("a") as again:
        assert again


def test_seats_are_counted_right_under_threads():
    w = WaitSeats(per_worker=5, per_token=5)
    gate, seated, lock = threading.Barrier(20), [], threading.Lock()

    def take() -> None:
        with w.seat("t") as ok:
            with lock:
                seated.append(ok)
            gate.wait()
    threads = [threading.Thread(target=take) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seated.count(True) == 5 and w.waiting == 0
