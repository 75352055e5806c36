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
