"""What a long loop (epochs, rounds, sweeps, solver iterations) shows:
:class:`ProgressLog`, one meaning per ``verbose`` level, on any stream
(a stream that is closed or fails ends the display, never the loop).

Nothing here imports the estimators.
"""

from __future__ import annotations

import sys
import time

__all__: list = []


def _is_terminal(stream):
    """Whether ``stream`` is a terminal; a stream whose ``isatty`` is missing
    or raises (closed, not a file, or any error of its own) is not one."""
    try:
        return bool(stream.isatty())
    except Exception:  # noqa: BLE001 - the display must never end the fit
        return False


def writable(stream):
    """Whether ``stream`` takes text (not None, not closed, has ``write``):
    what a library that prints (joblib's progress) needs before it is given
    ``verbose``."""
    try:
        stream.write("")
    except (OSError, ValueError, AttributeError, TypeError):
        return False
    return True


def _fmt_seconds(seconds):
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Stopwatch:
    """The steps before a loop (encoding the data, growing a teacher) and
    their durations: :class:`ProgressLog` shows them in one line before the
    first step and counts them in its elapsed time.

    Attributes
    ----------
    start : float
        ``time.perf_counter()`` when the watch started.
    steps : list of (str, float)
        What each step did and its seconds (steps without a description are
        counted in the elapsed time, not shown).
    """

    def __init__(self):
        self.start = self._last = time.perf_counter()
        self.steps = []

    def lap(self, what):
        """End a step that did ``what`` (None: nothing worth a word)."""
        now = time.perf_counter()
        if what:
            self.steps.append((what, now - self._last))
        self._last = now

    def summary(self):
        """``"what (1.2s); what (0.3s)"``, or an empty string."""
        return "; ".join(f"{what} ({_fmt_seconds(seconds)})" for what, seconds in self.steps)


class ProgressLog:
    """What a long loop (epochs, rounds) shows, one meaning per ``verbose`` level.

    - ``verbose=0``: nothing.
    - ``verbose=1``: on a terminal, a tqdm bar (when tqdm is installed) with
      the losses and the time left, which stays on screen when the loop ends;
      when the stream is not a terminal (a log file, a notebook's captured
      output, CI), one plain line per step instead, so that the log is
      readable, plus a closing line.
    - ``verbose>=2``: one plain line per step always, plus the closing line.

    A line reads ``Name epoch 3/150: loss 0.41234 val_loss 0.43210 [elapsed
    1.2s, left <= 58.8s]``; the time left is an upper bound when early
    stopping may end the loop sooner. With a ``clock``, one line before the
    first step says what was done before the loop and how long it took
    (``Name: encoded 700 rows of 8 columns into 41 features (0.1s); ...``),
    and the elapsed times count from the clock's start.

    Parameters
    ----------
    name : str
        What is running (the estimator's class name).
    total : int
        Number of steps planned (0: none, only the closing line).
    verbose : int
        The level above.
    unit : str, default="epoch"
        Name of one step.
    stream : file-like, default=None
        Where to write; ``sys.stderr`` (looked up at each call) when None.
    clock : Stopwatch, default=None
        The steps before the loop, shown first and counted in the elapsed time.
    """

    def __init__(self, name, total, verbose, unit="epoch", stream=None, clock=None):
        self.name, self.total, self.verbose, self.unit = name, int(total), int(verbose), unit
        self._stream = stream
        self.start = time.perf_counter() if clock is None else clock.start
        self._first = self.start if clock is None else time.perf_counter()
        self.bar = None
        if self.verbose > 0 and clock is not None and clock.steps:
            self._write(f"{name}: {clock.summary()}")
        if self.verbose == 1 and self.total > 0 and _is_terminal(self.stream):
            try:
                from tqdm.auto import tqdm
            except ImportError:  # pragma: no cover - optional dependency
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=self.total, desc=name, unit=unit, leave=True,
                                file=self.stream)

    @property
    def stream(self):
        return sys.stderr if self._stream is None else self._stream

    def step(self, i, **values):
        """Report step ``i`` (0-based) with named values (floats or None)."""
        if self.verbose <= 0:
            return
        shown = " ".join(f"{k} {v:.5f}" for k, v in values.items() if v is not None)
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix_str(shown, refresh=False)
            return
        now = time.perf_counter()
        elapsed = now - self.start
        left = (now - self._first) / (i + 1) * (self.total - i - 1)  # the loop's pace only
        self._write(f"{self.name} {self.unit} {i + 1}/{self.total}: {shown} "
                    f"[elapsed {_fmt_seconds(elapsed)}, left <= {_fmt_seconds(left)}]")

    def _write(self, line):
        """Write ``line`` to the stream; a stream that is closed, None or
        cannot be written or flushed ends the display, never the fit."""
        stream = self.stream
        if stream is None or getattr(self, "_broken", False):
            return
        try:
            stream.write(line + "\n")
        except (OSError, ValueError, AttributeError, TypeError):
            self._broken = True  # closed, or not a stream: nothing more is shown
            return
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass  # written; a stream without flush shows it when it can

    def close(self, summary=None):
        """End the display, with a closing line ``summary`` (verbose >= 1)."""
        if self.bar is not None:
            self.bar.close()
        if self.verbose > 0 and summary:
            elapsed = _fmt_seconds(time.perf_counter() - self.start)
            self._write(f"{self.name}: {summary} ({elapsed})")
