"""Every timing and sizing knob of the analysis' scheduling, in one frozen object.

The worker thread (worker.py), the registry of calls in flight (inflight.py), the links to
the analysis (helper_link.py, thread_link.py), the helper process (helper.py, activity.py,
cpu.py), the frames between them (channel.py) and the analysis (analyst.py) take a
`Pacing` as an argument with `Pacing()` as its default, as opentelemetry-python's
BatchProcessor takes its knobs.
Tests pass their own. Values that must agree are derived here, not kept equal by hand.
The helper receives its parent's `Pacing` with the settings.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pacing:
    # --- the worker thread (worker.py, gil.py) ---------------------------------------------
    # How long the worker may run Python before it lets a thread waiting for the GIL (an
    # event loop) run, and the pause that lets it (a zero sleep does not: the sleeper
    # usually takes the GIL back before the waiter is scheduled).
    slice_s: float = 0.0002
    yield_s: float = 0.0001
    # Rounds: how far apart at least, and how much CPU each may use. Under sustained load
    # (calls in flight and the work in hand may not wait any longer) rounds are
    # `busy_round_s` apart at least and `busy_ratio` times the CPU the last one used, so the
    # worker takes at most 1 / (1 + busy_ratio) of the interpreter.
    round_s: float = 0.005
    round_budget_s: float = 0.002
    busy_round_s: float = 0.02
    busy_round_budget_s: float = 0.0002
    busy_ratio: float = 4.0
    # With nothing to send, how long a pause waits for the analysis to answer.
    await_s: float = 0.05
    # How long after its response an exchange may wait for the process's calls in flight
    # (the worker's sending and recording, and the helper's analysis).
    max_lag_s: float = 1.0
    # Characters of payload the queue holds at most (queued and in analysis together); at
    # half of it the analysis estimates instead of counting (it is not keeping up).
    queue_chars: int = 256 << 20
    # Payloads of many values whose freeing is left for a moment without calls: at most
    # this many, for at most this long.
    max_kept_payloads: int = 8
    max_keep_s: float = 5.0
    # Pauses before a new helper after one exited: doubling from the first, up to the last.
    restart_pause_s: float = 1.0
    max_restart_pause_s: float = 60.0
    # Payloads this heavy (characters, or values) are handled with pauses inside a step
    # (`gil.sliced`); lighter ones without, since the profile hook slows Python down.
    slice_from_chars: int = 8 << 10
    slice_from_nodes: int = 256

    # --- calls in flight (inflight.py) ------------------------------------------------------
    # How long a response's path goes on after it completed: `settle_s`, plus its size at
    # `settle_chars_per_s` while it still crosses a transport (this process answered it),
    # or at `arrived_settle_chars_per_s` once it has arrived (the SDK validating it).
    settle_s: float = 0.002
    settle_chars_per_s: float = 10e6
    arrived_settle_chars_per_s: float = 100e6
    # How often a waiting worker looks whether calls are still in flight (each look takes
    # the GIL); an operation never finished stops counting after `stale_s`; at most
    # `max_tracked` are tracked.
    poll_s: float = 0.02
    stale_s: float = 10.0
    max_tracked: int = 10_000

    # --- the analysis (analyst.py, helper.py, activity.py, cpu.py) ----------------------------
    # Findings later than this after the response are given up (and not analysed).
    answer_within_s: float = 60.0
    # An exchange whose analysis starts this long after its response is estimated.
    max_backlog_s: float = 5.0
    # Characters tokenised between two pauses: in the helper, and on the thread link.
    helper_chunk_chars: int = 1 << 16
    thread_chunk_chars: int = 1 << 14
    # How often a waiting helper looks at the activity board.
    helper_poll_s: float = 0.002
    # Idle cores left to the application before the helper works beside its calls, and
    # how often the helper reads the machine's idle CPU.
    keep_free_cores: float = 2.0
    spare_every_s: float = 1.0
    # After a job of at least this many bytes the helper gives freed memory back.
    trim_after_bytes: int = 1 << 20

    # --- the pipes (channel.py, link.py) ----------------------------------------------------
    # About the most UTF-8 a frame carries; what a read takes from the findings pipe; what
    # the jobs pipe holds (Linux).
    piece_bytes: int = 64 << 10
    read_bytes: int = 64 << 10
    pipe_bytes: int = 1 << 20

    @property
    def max_settle_s(self) -> float:
        """A response path is waited for within the worker's own wait."""
        return self.max_lag_s

    @property
    def helper_max_wait_s(self) -> float:
        """The helper waits for calls as long as the worker does, from the same moment."""
        return self.max_lag_s

    @property
    def behind_chars(self) -> int:
        """Queued characters from which exact counting is not keeping up."""
        return self.queue_chars // 2

    def settle_seconds(self, weight: int, crosses_transport: bool = True) -> float:
        """How long a response path of `weight` characters likely goes on after it completed."""
        rate = self.settle_chars_per_s if crosses_transport else self.arrived_settle_chars_per_s
        return min(self.max_settle_s, self.settle_s + weight / rate)

    def restart_pause(self, failures: int) -> float:
        """The pause before a new helper after `failures` exits in a row."""
        return min(self.max_restart_pause_s, self.restart_pause_s * 2.0 ** max(0, failures - 1))


PACING = Pacing()
