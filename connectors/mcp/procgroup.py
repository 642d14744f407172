"""Ending a stdio upstream's whole process group, never only its first process.

A stdio upstream starts in a session and process group of its own (``start_new_session``), so a
Ctrl-C on the gateway's terminal is the gateway's to handle and everything the upstream starts
(``npx`` starts ``node``; a shell script its commands) can be found again by the group id, which
is the first process's pid. :func:`end_group` is the MCP stdio shutdown extended to the group:
stdin closed, a grace for the first process to leave, then SIGTERM to the group, a grace, SIGKILL
to the group. Every group still running is registered, and killed at interpreter exit
(:func:`_kill_all_at_exit`), so even a gateway or worker exiting without stopping its connectors
leaves no upstream process behind (a SIGKILL to the gateway itself is the one case nothing covers).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal

__all__ = ["register", "end_group", "group_alive"]

_LIVE: set[int] = set()  # process group ids of stdio upstreams not yet ended
_POLL_S = 0.02  # how often a grace period checks whether the group is gone (there is no event for it)


def register(pgid: int) -> None:
    """A group started by this process: killed at exit unless :func:`end_group` ended it first."""
    _LIVE.add(pgid)


def group_alive(pgid: int) -> bool:
    """Whether any process of the group exists (zombies not yet reaped by their parent included)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member that is not ours to signal: it exists
        return True
    return True


def _signal(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _gone(proc: asyncio.subprocess.Process, pgid: int, grace_s: float) -> bool:
    """Wait up to ``grace_s`` for the first process to exit and the group to empty."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(grace_s):
            await proc.wait()
            while group_alive(pgid):  # noqa: ASYNC110 - no event tells that a process group emptied
                await asyncio.sleep(_POLL_S)
    return proc.returncode is not None and not group_alive(pgid)


async def end_group(proc: asyncio.subprocess.Process, grace_s: float) -> None:
    """Stop ``proc`` (a group leader) and everything in its group; returns when they are gone
    (bounded: at most two graces and one more for SIGKILL to take effect)."""
    pgid = proc.pid
    try:
        if proc.returncode is None and proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()  # the MCP way to ask a stdio server to exit
        if await _gone(proc, pgid, grace_s):
            return
        _signal(pgid, signal.SIGTERM)
        if await _gone(proc, pgid, grace_s):
            return
        _signal(pgid, signal.SIGKILL)
        await _gone(proc, pgid, max(grace_s, 1.0))
    finally:
        if proc.returncode is not None and not group_alive(pgid):
            _LIVE.discard(pgid)


@atexit.register
def _kill_all_at_exit() -> None:
    for pgid in list(_LIVE):
        _signal(pgid, signal.SIGKILL)
    _LIVE.clear()
