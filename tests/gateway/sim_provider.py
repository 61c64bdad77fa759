"""A webhook provider, simulated as the real ones behave (docs/webhooks/README.md's table): it signs
each delivery as Stripe does (`Stripe-Signature: t=..,v1=..`, a fresh timestamp per send,
`pending_webhooks` changing between sends), resends on any non-2xx answer, a connection
error or a timeout on a short schedule, sends some copies concurrently and some after a 2xx
already came back (as providers do when an answer was slow), at most `max_sends` per event.
It keeps, per event, what it sent and what came back: an event is acknowledged once any send
got a 2xx.
"""
from __future__ import annotations

import hashlib
import heapq
import hmac
import itertools
import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

import requests

STRIPE_SECRET = "whsec_sim_" + "s" * 32


@dataclass
class Story:
    """One event at the provider."""

    event_id: str
    concurrent: int = 0  # extra copies sent together with the first
    after_ack: int = 0  # extra copies sent after the first 2xx, as if it came too late
    reserved: int = 0  # sends planned or made (never more than max_sends)
    pending: int = 0  # sends planned or in flight now
    resends: int = 0  # resends after failures so far (the schedule's index)
    answers: list = field(default_factory=list)  # status codes, "timeout", "error"
    answered_at: list = field(default_factory=list)  # monotonic, one per answer
    acked_at: Optional[float] = None  # monotonic time of the first 2xx

    @property
    def acked(self) -> bool:
        return self.acked_at is not None


class SimulatedProvider:
    def __init__(self, ingest_url: str, events: int, *, rate: Optional[float] = None,
                 schedule: tuple[float, ...] = (0.1, 0.3, 1.0, 2.0), max_sends: int = 5,
                 timeout: float = 3.0, threads: int = 16, seed: int = 14,
                 concurrent_share: float = 0.15, after_ack_share: float = 0.15,
                 prefix: str = "evt_sim_", secret: str = STRIPE_SECRET):
        self.url, self.rate, self.schedule = ingest_url, rate, schedule
        self.max_sends, self.timeout, self.threads = max_sends, timeout, threads
        self.secret = secret.encode()
        rng = random.Random(seed)
        self.stories = []
        for n in range(events):
            story = Story(f"{prefix}{seed}_{n:05d}")
            roll = rng.random()
            if roll < concurrent_share:
                story.concurrent = rng.randint(1, 2)
            elif roll < concurrent_share + after_ack_share:
                story.after_ack = rng.randint(1, 2)
            self.stories.append(story)
        self.answers: Counter = Counter()  # status code, "timeout" or "error" -> sends
        self.bodies: Counter = Counter()  # the 2xx answers' "status" -> sends
        self.answered_2xx_at: list[float] = []  # monotonic times of 2xx answers
        self._heap: list = []
        self._seq = itertools.count()
        self._busy = 0
        self._cond = threading.Condition()
        self._local = threading.local()
        self._stop = threading.Event()

    # --- running --------------------------------------------------------------------------

    def run(self, deadline: float) -> None:
        """Send everything, with every resend, or stop at `deadline` (monotonic)."""
        start = self.started = time.monotonic()
        with self._cond:
            for n, story in enumerate(self.stories):
                due = start + (n / self.rate if self.rate else 0)
                for _ in range(1 + story.concurrent):
                    self._push(due, story)
        workers = [threading.Thread(target=self._work, args=(deadline,), daemon=True)
                   for _ in range(self.threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(max(1.0, deadline - time.monotonic() + 15))

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()

    def sends(self) -> int:
        return sum(len(s.answers) for s in self.stories)

    def acked(self) -> set[str]:
        return {s.event_id for s in self.stories if s.acked}

    # --- inside ---------------------------------------------------------------------------

    def _push(self, due: float, story: Story) -> bool:
        """Plan one more send of `story` (under the lock); False past max_sends."""
        if story.reserved >= self.max_sends:
            return False
        story.reserved += 1
        story.pending += 1
        heapq.heappush(self._heap, (due, next(self._seq), story))
        self._cond.notify()
        return True

    def _work(self, deadline: float) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stop.is_set() or time.monotonic() > deadline:
                        return
                    if not self._heap and not self._busy:
                        self._cond.notify_all()
                        return  # nothing planned and nothing in flight: done
                    wait = self._heap[0][0] - time.monotonic() if self._heap else 0.5
                    if self._heap and wait <= 0:
                        _, _, story = heapq.heappop(self._heap)
                        self._busy += 1
                        break
                    self._cond.wait(min(max(wait, 0.001), 0.5))
            answer: object = "error"
            try:
                answer = self._send(story)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._settle(story, answer)

    def _settle(self, story: Story, answer) -> None:
        """Under the lock: note the answer, plan what a provider does next."""
        now = time.monotonic()
        story.answers.append(answer)
        story.answered_at.append(now)
        story.pending -= 1
        self.answers[answer] += 1
        if isinstance(answer, int) and 200 <= answer <= 299:
            self.answered_2xx_at.append(now)
            if story.acked_at is None:
                story.acked_at = now
                for k in range(story.after_ack):  # "the answer came too late": send again
                    self._push(now + self.schedule[min(k, len(self.schedule) - 1)], story)
            return
        if story.acked or story.pending:
            return  # another copy was acknowledged, or is still on its way: wait for it
        delay = self.schedule[min(story.resends, len(self.schedule) - 1)]
        story.resends += 1
        self._push(now + delay, story)
        self._cond.notify_all()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            session.trust_env = False
        return session

    def _send(self, story: Story):
        body = json.dumps({
            "id": story.event_id, "object": "event", "type": "invoice.paid",
            "data": {"object": {"id": "in_" + story.event_id[-8:], "amount_due": 1999}},
            # falls as other endpoints acknowledge: differs between sends (volatile)
            "pending_webhooks": max(1, 3 - len(story.answers)),
        }).encode()
        t = int(time.time())
        signature = hmac.new(self.secret, f"{t}.".encode() + body, hashlib.sha256).hexdigest()
        headers = {"Stripe-Signature": f"t={t},v1={signature}",
                   "Content-Type": "application/json; charset=utf-8",
                   "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)"}
        try:
            r = self._session().post(self.url, data=body, headers=headers,
                                     timeout=(2, self.timeout))
            if r.status_code in (200, 202):
                with self._cond:  # accepted, duplicate, or held (a changed body)
                    self.bodies[r.json().get("status")] += 1
            return r.status_code
        except requests.Timeout:
            return "timeout"
        except requests.RequestException:
            self._local.session = None  # a connection the server dropped: a new one
            return "error"
