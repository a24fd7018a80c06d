"""The peak memory of this process, for measurements run in a fresh interpreter.

``resource.getrusage(RUSAGE_SELF).ru_maxrss`` is not that on Linux: ``execve`` folds the peak of
the memory it replaces into the new program's figure, and ``subprocess`` starts a child by
``vfork`` + ``exec``, so a probe launched from a test run that had grown to 500 MB reported
500 MB whatever it used itself (the 100,000-message chat's 158 MB read 524 MB late in the
suite). ``VmHWM`` in ``/proc/self/status`` is the peak of this program's own memory; elsewhere
``ru_maxrss`` is the best there is.
"""

from __future__ import annotations

import resource

__all__ = ["peak_rss_kib"]


def peak_rss_kib() -> int:
    """Peak resident memory of this process, in KiB (``VmHWM`` where Linux reports it)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
