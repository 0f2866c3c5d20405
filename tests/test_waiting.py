"""The suite's waits (tests/waiting.py): what they say when what they wait for never comes."""

from __future__ import annotations

import pytest

from .waiting import delivered


def test_deliveries_that_never_all_come_say_how_many_did():
    with pytest.raises(AssertionError, match=r"^1 of 3 delivered within 0\.05 s$"):
        delivered(["only one"], 3, 0.05)
