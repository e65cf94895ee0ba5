"""Streams and events on the jax device, as timing code written for `torch.cuda` uses them.

JAX gives each device one ordered queue of work, so jaxdev has one stream per device: `Stream()`,
`current_stream()` and `with stream(s):` are accepted and change nothing, and `wait_stream` /
`wait_event` hold trivially. An `Event` records the moment all work issued before it has finished
(it synchronizes the device), so `start.elapsed_time(end)` measures device time in milliseconds as
on CUDA, at the price of a synchronization per record.
"""

from __future__ import annotations

import contextlib
import time

import torch

from jaxdev import device as jax_device_module


class Stream:
    """The device's one stream."""

    @property
    def device(self) -> torch.device:
        return torch.device("jax", 0)

    def __init__(self, device=None, priority=0):
        self.priority = priority

    def synchronize(self) -> None:
        torch.jax.synchronize()

    def wait_stream(self, stream) -> None:
        pass  # one ordered queue: already waited

    def wait_event(self, event) -> None:
        pass

    def query(self) -> bool:
        self.synchronize()
        return True

    def record_event(self, event=None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream)

    def __hash__(self) -> int:
        return hash(Stream)


_STREAM = Stream()


def current_stream(device=None) -> Stream:
    return _STREAM


def default_stream(device=None) -> Stream:
    return _STREAM


@contextlib.contextmanager
def stream(s):
    yield


class Event:
    """A point in the device's work; timing needs `enable_timing=True`, as on CUDA."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.enable_timing = enable_timing
        self._time: float | None = None

    def record(self, stream=None) -> None:
        torch.jax.synchronize()
        self._time = time.perf_counter()

    def synchronize(self) -> None:
        torch.jax.synchronize()

    def wait(self, stream=None) -> None:
        pass

    def query(self) -> bool:
        return self._time is not None

    def elapsed_time(self, end: Event) -> float:
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._time is None or end._time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end._time - self._time) * 1000.0


def install() -> None:
    """torch.jax.Stream, Event, current_stream, default_stream and stream, on the device module."""
    for api in (Stream, Event, current_stream, default_stream, stream):
        setattr(jax_device_module.module, api.__name__, api)
