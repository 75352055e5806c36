"""A progress bar on stderr for long commands, shown only when stderr is a terminal.

Silent in pipes, in files and under ``--json`` (the caller passes ``enabled=False``), so scripted
output never carries control characters.  No dependency: one line rewritten with ``\\r``.
"""

from __future__ import annotations

import sys
import time


def progress(items, label: str, enabled: bool = True, stream=None):
    """Iterate over ``items`` (a sized iterable), drawing ``label [#####.....] 12/656`` on stderr
    at most ten times a second while it runs and erasing it at the end; a plain pass-through when
    ``enabled`` is false or the stream is not a terminal."""
    stream = stream or sys.stderr
    if not (enabled and hasattr(stream, "isatty") and stream.isatty()):
        yield from items
        return
    items = list(items)
    total, last, width = len(items), 0.0, 30
    try:
        for done, item in enumerate(items):
            now = time.monotonic()
            if now - last > 0.1:
                filled = round(width * done / max(total, 1))
                stream.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
                stream.flush()
                last = now
            yield item
    finally:
        stream.write("\r" + " " * (len(label) + width + 20) + "\r")
        stream.flush()


class working:
    """``with working("calibrating", enabled=not args.json): ...`` shows ``calibrating ... 12 s`` on
    stderr, updated every second from a background thread, while a call with no steps to count runs
    (a fit, a validation); erased at the end.  Nothing at all when disabled or not on a terminal."""

    def __init__(self, label: str, enabled: bool = True, stream=None):
        self.label, self.stream = label, stream or sys.stderr
        self.enabled = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self._thread = None

    def __enter__(self):
        if self.enabled:
            import threading

            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def _tick(self) -> None:
        start = time.monotonic()
        while not self._stop.wait(1.0):
            self.stream.write(f"\r{self.label} ... {time.monotonic() - start:.0f} s")
            self.stream.flush()

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self.stream.write("\r" + " " * (len(self.label) + 20) + "\r")
            self.stream.flush()
