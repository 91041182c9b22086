"""A run's ETA, smoothed: an exponential moving average of its progress rate.

Trainers report progress (``current`` of ``total`` ``unit``s, at the worker's time ``t``), some
with an ETA of their own that jumps with every slow or fast step, and the prediction phase
with none. The server computes the ETA the pages and the CLI show, the same way for every
trainer and backend:

- each progress event gives the rate since the previous one, ``(current - prev) / (t - prev_t)``;
- the kept rate is an exponential moving average of those rates with a time constant of
  ``TAU_S`` seconds (weight ``1 - exp(-dt / TAU_S)`` for an interval of ``dt`` s, so a report
  after a long pause weighs more than one right after the last, and bursts do not dominate);
- the ETA is ``(total - current) / rate``;
- a new phase (the unit changes, e.g. ``step`` to ``prediction``, or ``current`` goes back)
  starts a new average: the prediction phase has an ETA of its own, from its own rate. The
  first report of a phase has no rate yet, so no ETA until the second.
"""

import math
from typing import Optional, Tuple

TAU_S = 10.0


class Eta:
    """The smoothed ETA of one run (``RunEvents`` keeps one per run)."""

    def __init__(self) -> None:
        self.unit: Optional[str] = None
        self.last: Optional[Tuple[float, float]] = None  # (current, t) of the phase's last point
        self.rate: Optional[float] = None  # units per second, smoothed

    def update(self, current: float, total: Optional[float], unit: Optional[str],
               t: float) -> Optional[float]:
        """Seconds left in the current phase after this report, or None (not known yet)."""
        last = self.last
        if unit != self.unit or last is None or current < last[0] or t < last[1]:
            self.unit, self.last, self.rate = unit, (current, t), None  # a new phase
            return None
        dt = t - last[1]
        if dt > 0:  # reports with one timestamp add up until time moves
            rate = (current - last[0]) / dt
            weight = 1.0 - math.exp(-dt / TAU_S)
            self.rate = rate if self.rate is None else weight * rate + (1 - weight) * self.rate
            self.last = (current, t)
        return self.left(current, total)

    def left(self, current: float, total: Optional[float]) -> Optional[float]:
        if not total or self.rate is None or self.rate <= 0:
            return None
        return max(0.0, (total - current) / self.rate)
