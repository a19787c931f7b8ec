"""Progress bars for long operations (rebuild, export, reembed, benchmarks).

The library never draws anything itself: long operations take a ``progress(done, total)``
callback. This module makes such callbacks for the CLI and the benchmarks:

* with tqdm installed (``pip install 'hmem[progress]'``) a tqdm bar with rate and ETA;
* without it, a one-line counter (``replayed 1200/5000 events``) rewritten in place;
* nothing at all when ``quiet`` is set or the stream (stderr) is not a terminal, so logs, pipes
  and CI output stay clean.

tqdm is optional so that the core stays msgspec, duckdb and numpy: a bar is a comfort, the plain
counter says the same thing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO, TypeVar

__all__ = ["Progress", "progress_bar", "track", "enabled"]

Progress = Callable[[int, int], None]
T = TypeVar("T")

# "replayed 1200/5000 events |####      | 24% [00:01<00:03, 950.00 events/s]": the counts read
# the same with and without tqdm (tqdm's unit carries its leading space, for the rate).
_BAR_FORMAT = (
    "{desc} {n_fmt}/{total_fmt}{unit} |{bar}| {percentage:3.0f}% "
    "[{elapsed}<{remaining}, {rate_fmt}]"
)


def enabled(*, quiet: bool = False, stream: TextIO | None = None) -> bool:
    """Whether a bar would be drawn: not quiet, and the stream (default stderr) is a terminal."""
    if quiet:
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


@contextmanager
def progress_bar(
    desc: str, unit: str, *, quiet: bool = False, stream: TextIO | None = None,
    leave: bool = True,
) -> Iterator[Progress | None]:
    """A ``progress(done, total)`` callback for the duration of the block, or None when no bar
    should be drawn (quiet, or not a terminal). Pass it straight to ``Memory.rebuild``,
    ``Memory.reembed`` or ``hmem.notebook.export.export_parquet``::

        with progress_bar("replayed", "events") as progress:
            m.rebuild(progress)

    ``leave=False`` erases the bar at the end (for reports that print their own lines)."""
    stream = sys.stderr if stream is None else stream
    if not enabled(quiet=quiet, stream=stream):
        yield None
        return
    bar = _Bar(desc, unit, stream, leave)
    try:
        yield bar
    finally:
        bar.close()


def track(
    items: Iterable[T],
    desc: str,
    unit: str,
    *,
    total: int | None = None,
    quiet: bool = False,
    stream: TextIO | None = None,
    leave: bool = True,
) -> Iterator[T]:
    """Iterate over ``items`` with a bar (``total`` defaults to ``len(items)`` when it has one)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with progress_bar(desc, unit, quiet=quiet, stream=stream, leave=leave) as progress:
        if progress is None:
            yield from items
            return
        done = 0
        for item in items:
            yield item
            done += 1
            progress(done, total if total is not None else done)


class _Bar:
    """A callback drawing on tqdm when it is installed, else a plain counter line."""

    def __init__(self, desc: str, unit: str, stream: TextIO, leave: bool) -> None:
        self.desc, self.unit, self.stream, self.leave = desc, unit, stream, leave
        self.tqdm: Any = None
        self.drawn = False
        try:
            from tqdm import tqdm
        except ImportError:
            self._tqdm_class: Any = None
        else:
            self._tqdm_class = tqdm

    def __call__(self, done: int, total: int) -> None:
        if self._tqdm_class is not None:
            if self.tqdm is None:
                self.tqdm = self._tqdm_class(
                    total=total, desc=self.desc, unit=" " + self.unit, file=self.stream,
                    bar_format=_BAR_FORMAT, dynamic_ncols=True, leave=self.leave,
                )
            if self.tqdm.total != total:
                self.tqdm.total = total
            self.tqdm.update(done - self.tqdm.n)
            return
        print(f"\r{self.desc} {done}/{total} {self.unit}", end="", file=self.stream, flush=True)
        self.drawn = True

    def close(self) -> None:
        if self.tqdm is not None:
            self.tqdm.close()
        elif self.drawn and self.leave:
            print(file=self.stream, flush=True)
        elif self.drawn:
            print("\r\033[K", end="", file=self.stream, flush=True)
