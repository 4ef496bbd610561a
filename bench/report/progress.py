"""The progress line on stderr: which benchmark, n of N, and the estimated time left.

On a terminal it is one line rewritten in place; otherwise (CI logs, pipes) one plain line per
benchmark, so a log shows where a run stopped.
"""

from __future__ import annotations

import shutil
import sys
import time


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    def __init__(self, total: int, first_guess_s: float, stream=None):
        """first_guess_s: the expected seconds per benchmark until one has been timed."""
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.started = time.monotonic()
        self.first_guess_s = first_guess_s
        self._width = 0

    def seconds_left(self) -> float:
        per_benchmark = ((time.monotonic() - self.started) / self.done if self.done
                         else self.first_guess_s)
        return per_benchmark * (self.total - self.done)

    def start(self, name: str) -> None:
        """Announces the benchmark about to run."""
        text = (f"[{self.done + 1}/{self.total}] {name}  "
                f"(about {format_duration(self.seconds_left())} left)")
        if self.tty:
            columns = shutil.get_terminal_size((100, 20)).columns
            text = text[:columns - 1]
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def finish_one(self) -> None:
        self.done += 1

    def note(self, message: str) -> None:
        """A message that stays (a warning, a failure), printed above the progress line."""
        if self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
        self.stream.write(message + "\n")
        self.stream.flush()

    def close(self) -> None:
        elapsed = format_duration(time.monotonic() - self.started)
        self.note(f"ran {self.done} of {self.total} benchmark runs in {elapsed}")
