"""Group commit's leader/follower (service/grouping.py) with real threads: who goes when, and
what each member gets when the group's statement fails. The statements themselves, on both
databases, are tested in tests/integration/test_grouping.py."""
from __future__ import annotations

import threading
import time

import pytest

from keystore_service import errors
from keystore_service.service.grouping import Groups


class Statements:
    """Records each group it is sent; the first call blocks until `release` is set, so the
    test decides what queues behind a statement in flight."""

    def __init__(self, fail=None):
        self.sent: list[list[str]] = []
        self.alone: list[str] = []
        self.release = threading.Event()
        self.fail = fail

    def many(self, items):
        if not self.sent:
            self.release.wait(10)
        self.sent.append(list(items))
        if self.fail is not None and len(items) > 1:
            raise self.fail
        return {item: f"row of {item}" for item in items}

    def one(self, item):
        self.alone.append(item)
        return f"own row of {item}"


def start(groups, items, out, first=0):
    """One thread per item, submitting it; its answer (or error) lands in out[first + i]."""
    threads = []
    for i, item in enumerate(items, first):
        def run(i=i, item=item):
            try:
                out[i] = groups.submit(item, item)
            except Exception as exc:  # collected and asserted on
                out[i] = exc
        threads.append(threading.Thread(target=run))
        threads[-1].start()
    return threads


def queued(groups, n):
    deadline = time.monotonic() + 10
    while len(groups._queue) < n:
        assert time.monotonic() < deadline, "the submits did not queue"
        time.sleep(0.001)


def test_a_lone_claim_goes_at_once_alone():
    s = Statements()
    s.release.set()
    groups = Groups(s.many, s.one)
    assert groups.submit("a", "a") == "row of a"
    assert s.sent == [["a"]] and (groups.groups, groups.members) == (1, 1)


def test_claims_that_arrive_while_one_is_in_flight_go_together_and_keys_twice_wait():
    s = Statements()
    groups = Groups(s.many, s.one)
    out: dict = {}
    first = start(groups, ["a"], out)
    while not groups._in_flight:
        time.sleep(0.001)
    later = {}
    rest = start(groups, ["b", "c", "b", "d"], later)
    queued(groups, 4)
    s.release.set()
    for t in first + rest:
        t.join(10)
    assert s.sent[0] == ["a"]
    assert sorted(s.sent[1]) == ["b", "c", "d"]  # one statement for three claims
    assert s.sent[2:] == [["b"]]  # the key twice: the next group
    assert out == {0: "row of a"}
    assert sorted(later.values()) == ["row of b", "row of b", "row of c", "row of d"]
    assert (groups.groups, groups.members) == (3, 5)


def test_a_group_never_exceeds_its_limit():
    s = Statements()
    groups = Groups(s.many, s.one, limit=3)
    out: dict = {}
    threads = start(groups, ["first"], out)
    while not groups._in_flight:
        time.sleep(0.001)
    threads += start(groups, [f"k{i}" for i in range(7)], out, first=1)
    queued(groups, 7)
    s.release.set()
    for t in threads:
        t.join(10)
    assert [len(g) for g in s.sent] == [1, 3, 3, 1]
    assert len(out) == 8 and all(v.startswith("row of") for v in out.values())


def behind_one_in_flight(s: Statements, groups: Groups, items: list[str]) -> dict:
    """"a" goes alone and is held in flight while `items` queue behind it; then all run."""
    out: dict = {}
    threads = start(groups, ["a"], out)
    while not groups._in_flight:
        time.sleep(0.001)
    threads += start(groups, items, out, first=1)
    queued(groups, len(items))
    s.release.set()
    for t in threads:
        t.join(10)
    return out


def test_an_outage_fails_every_member_of_the_group():
    s = Statements(fail=errors.Unavailable())
    groups = Groups(s.many, s.one)
    out = behind_one_in_flight(s, groups, ["b", "c"])
    assert out[0] == "row of a"
    assert isinstance(out[1], errors.Unavailable) and isinstance(out[2], errors.Unavailable)
    assert s.alone == []  # an unknown outcome is not sent again here: the outage path does


def test_any_other_failure_sends_each_member_alone():
    s = Statements(fail=ValueError("one bad row"))
    groups = Groups(s.many, s.one)
    out = behind_one_in_flight(s, groups, ["b", "c"])
    assert sorted(s.alone) == ["b", "c"] and groups.failed == 1
    assert out == {0: "row of a", 1: "own row of b", 2: "own row of c"}


@pytest.mark.parametrize("threads", [8, 32])
def test_many_threads_each_get_their_own_answer(threads):
    s = Statements()
    s.release.set()
    groups = Groups(s.many, s.one)
    out: dict = {}
    for t in start(groups, [f"k{i % (threads // 2)}" for i in range(threads)] * 4, out):
        t.join(30)
    assert all(out[i] == f"row of k{i % (threads // 2)}" for i in range(threads * 4))
    assert groups.members == threads * 4 and not groups._in_flight and not groups._queue
