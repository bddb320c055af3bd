# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The names the kernel shows for mcp-tokens' own threads and processes.

`top`, `ps` and `/proc/<pid>/comm` show a thread's kernel name, not Python's: without one
the analysis thread is another `python3` thread of the application, and the counting
service another `python3` process. Named, an operator sees at a glance what the
instrumentation costs in CPU and memory (`top -H`, `ps -eLo pid,tid,comm,pcpu`).

A thread names itself by writing its own `/proc/self/task/<tid>/comm` (Linux; 15 bytes at
most): no ctypes, nothing to load. Where that file does not exist nothing is named.
"""

from __future__ import annotations

import threading

ANALYSIS_THREAD = "mcp-tokens"  # the worker thread of an instrumented process
SERVICE = "mcp-tokens-svc"  # the counting service's supervisor
COUNTER = "mcp-tokens-cnt"  # each of its counting processes

_MAX_NAME_BYTES = 15  # TASK_COMM_LEN, its final NUL excluded


def name_this_thread(name: str) -> None:
    """Give the calling thread `name` in the kernel's listings (the process's name, when it
    is the main thread); best effort."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w", encoding="ascii") as comm:
            comm.write(name[:_MAX_NAME_BYTES])
    except Exception:  # a name is a convenience: nothing may stop the thread for it
        pass
