"""Tails: following a run from outside its driver, from any process that shares the store.

``tail.py`` merges the log and the transport; ``dedup.py`` is its rule, sans-IO;
``follower.py`` reads the store for runs executing elsewhere; ``inbox.py`` hands frames over.
"""

from .dedup import Dedup
from .follower import LogFollower
from .tail import Gap, tail

__all__ = ["Dedup", "Gap", "LogFollower", "tail"]
