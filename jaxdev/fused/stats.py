"""Fused eager's counters for this process, read by the recorder, the program runner, tests and
benchmarks (`jaxdev.fused.recorder.STATS` is the same class)."""

from __future__ import annotations

import typing


class STATS:
    """What fused eager did in this process: ops recorded (replayed among them), ops run eagerly (by op and reason), flushes
    of at least one op, programs built (traced and compiled) for them, flushes that replayed a cached
    program (hits)."""

    recorded = 0
    replayed = 0  # of those, ops the trie expected (replay.py: a guard, not a key)
    flushes = 0
    programs = 0
    hits = 0
    uploads = 0  # host-to-device copies run at once without a flush (_upload)
    fresh = 0  # zeros_like/empty_like/full_like keeping the memory format, run at once (_fresh)
    moved = 0  # ops keyed with input offsets as program data (offsets.moving), at new places in the trie
    eager: typing.ClassVar[dict] = {}

    @classmethod
    def reset(cls) -> None:
        cls.recorded = cls.replayed = cls.flushes = cls.programs = cls.hits = cls.uploads = cls.moved = cls.fresh = 0
        cls.eager = {}
