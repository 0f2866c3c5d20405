"""Tails: following a run from outside its driver, from any process that shares the store.

``tail.py`` merges the log and the transport, by the rule of ``wire/replay.py``;
``follower.py`` reads the store for runs executing elsewhere; ``inbox.py`` hands frames over.
"""

from .follower import LogFollower
from .tail import Behind, tail

__all__ = ["Behind", "LogFollower", "tail"]
