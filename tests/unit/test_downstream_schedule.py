"""``--jobs N`` (jaxrel.downstream.schedule): libraries at once, the longest first, within the memory expected of
them; and the budget each library gets (learned from its last passing run, else its card's, else the default)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from jaxrel.downstream.cards import FLOOR, Card, Learned, budget_for
from jaxrel.downstream.schedule import Job, available_memory, run_jobs

GIB = 1 << 30


class Tracker:
    """Records which jobs ran at the same time."""

    def __init__(self, together: set[str] = frozenset()) -> None:
        self.lock, self.running, self.overlaps, self.order = threading.Lock(), set(), [], []
        self.barrier = threading.Barrier(len(together)) if together else None
        self.together = together

    def __call__(self, name: str) -> str:
        with self.lock:
            self.overlaps.append(frozenset(self.running | {name}))
            self.running.add(name)
            self.order.append(name)
        if self.barrier is not None and name in self.together:
            self.barrier.wait(timeout=60)  # broken (and the test fails) unless they really run at once
        with self.lock:
            self.running.discard(name)
        return name.upper()


def test_jobs_run_together_when_their_memory_fits_and_results_keep_the_items_order() -> None:
    jobs = [Job("a", 10, GIB), Job("b", 30, GIB), Job("c", 20, GIB)]
    tracker = Tracker(together={"b", "c"})
    assert run_jobs(jobs, tracker, at_once=2, capacity=2 * GIB) == ["A", "B", "C"]
    assert tracker.order[:2] == ["b", "c"], "the longest first"
    assert max(len(o) for o in tracker.overlaps) <= 2


def test_a_job_whose_memory_does_not_fit_waits_for_the_others_and_one_too_large_runs_alone() -> None:
    jobs = [Job("big", 30, 3 * GIB), Job("small", 20, GIB), Job("huge", 10, 9 * GIB)]
    tracker = Tracker()
    assert run_jobs(jobs, tracker, at_once=3, capacity=3 * GIB) == ["BIG", "SMALL", "HUGE"]
    assert all(len(overlap) == 1 for overlap in tracker.overlaps), tracker.overlaps


def test_one_job_at_a_time_without_jobs_and_the_first_error_is_raised_after_the_others_end() -> None:
    tracker = Tracker()
    assert run_jobs([Job("x", 1, GIB), Job("y", 2, GIB)], tracker, at_once=1, capacity=None) == ["X", "Y"]
    assert all(len(o) == 1 for o in tracker.overlaps)

    def failing(name: str) -> str:
        if name == "bad":
            raise RuntimeError("boom")
        return name

    with pytest.raises(RuntimeError, match="boom"):
        run_jobs([Job("bad", 5, GIB), Job("ok", 1, GIB)], failing, at_once=1, capacity=None)


def test_available_memory_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   12000000 kB\n")
    assert available_memory(meminfo) == 12000000 * 1024
    meminfo.write_text("garbage\n")
    assert available_memory(meminfo) is None and available_memory(tmp_path / "absent") is None


def test_the_budget_is_learned_else_the_cards_else_the_default() -> None:
    card = Card("lib", "x", budget=600)
    assert budget_for(card, Learned(80.4, None, "2026-11-28"), 900) == (241, "learned: 80 s on 2026-11-28 × 3")
    assert budget_for(card, Learned(5, 1, "2026-11-28"), 900)[0] == FLOOR
    assert budget_for(card, None, 900) == (600, "its card")
    assert budget_for(Card("lib", "x"), None, 900) == (900, "the default: no card budget, no passing run kept")
    assert budget_for(None, None, 450)[0] == 450
