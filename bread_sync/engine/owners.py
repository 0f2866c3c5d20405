"""Who owns a run, and whether that owner is known to be gone without waiting for its lease.

A run's owner is the process executing it, written ``host:pid:start:kernel:tag``: the host name,
the pid, the process's start time (field 22 of ``/proc/<pid>/stat``), the kernel it runs under
(boot id and pid namespace: two containers may share a host name) and a tag telling the ``Bread``
objects of one process apart. A process under the same host name and kernel then knows at once
that the owner is gone: no process has that pid, or it is a zombie, or started at another time.
Every other owner (another host, another format, no ``/proc``) goes by the lease alone.
"""

from __future__ import annotations

import functools
import os
import re
import socket
from pathlib import Path
from typing import NamedTuple

_OWNER = re.compile(r"(?P<host>[^:]*):(?P<pid>[1-9][0-9]*):(?P<start>[0-9]+):(?P<kernel>[0-9a-f]+\.[0-9]+):[^:]*")
#: Field 3 of /proc/<pid>/stat, the process's state: a zombie or a dead task runs no more.
_ENDED_STATES = frozenset("ZXx")


class Owner(NamedTuple):
    host: str
    pid: int
    start: int
    kernel: str


def parse(owner: str | None) -> Owner | None:
    """The process an owner string names; None for any other format, which the lease decides."""
    match = _OWNER.fullmatch(owner or "")
    if match is None:
        return None
    return Owner(match["host"], int(match["pid"]), int(match["start"]), match["kernel"])


def parse_stat(text: str) -> tuple[str, int]:
    """The state and start time (ticks after boot) in a ``/proc/<pid>/stat`` line."""
    # The command name (field 2) is in parentheses and may itself hold spaces and parentheses.
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def this_process(tag: str) -> str:
    """The owner string of the calling process (a forked child names itself, not its parent)."""
    me = _identity(os.getpid())
    if me is None:  # liveness cannot be told here: a form parse() does not know, left to the lease
        return f"{socket.gethostname()}:{os.getpid()}:{tag}"
    return f"{me.host}:{me.pid}:{me.start}:{me.kernel}:{tag}"


def is_dead_local(owner: str | None) -> bool:
    """Whether ``owner`` was a process of this host that no longer exists. False whenever that
    cannot be known (another host, another format, no ``/proc``): the lease decides those."""
    me, them = _identity(os.getpid()), parse(owner)
    if me is None or them is None or (them.host, them.kernel) != (me.host, me.kernel):
        return False
    if them.pid == me.pid:
        return them.start != me.start  # this very process is alive by definition
    return _gone(them)


def _gone(owner: Owner) -> bool:
    # Only reached where this process read its own /proc entry: on Windows, os.kill would end it.
    try:
        os.kill(owner.pid, 0)  # signal 0 sends nothing: it asks whether the pid exists
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # another user's process: it exists, and its stat may still be readable
    try:
        state, start = parse_stat(Path(f"/proc/{owner.pid}/stat").read_text())
    except (OSError, ValueError, IndexError):
        return False  # hidden (hidepid) or gone this instant: a later look, or the lease, tells
    return state in _ENDED_STATES or start != owner.start


@functools.lru_cache(maxsize=1)  # keyed by pid, so a forked child looks itself up again
def _identity(pid: int) -> Owner | None:
    try:
        stat = Path("/proc/self/stat").read_text()
        _, start = parse_stat(stat)
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except (OSError, ValueError, IndexError):
        return None
    if stat.split(" ", 1)[0] != str(pid):
        return None  # a /proc of another pid namespace: its pids are not the ones os.kill sees
    kernel = f"{boot.replace('-', '')[:8]}.{re.sub(r'[^0-9]', '', namespace)}"
    host = socket.gethostname()
    if not _OWNER.fullmatch(f"{host}:{pid}:{start}:{kernel}:"):
        return None  # a host name with a colon: parse() would misread the owner
    return Owner(host, pid, start, kernel)
