"""What a config's code raised, said in one line by :func:`bread_sync.loading.raised_in`."""

from __future__ import annotations

import os

import pytest

from bread_sync.errors import INVALID_REQUEST, BreadError
from bread_sync.loading import raised_at, raised_in


def test_a_bread_error_is_said_with_its_code():
    with pytest.raises(ValueError) as raised, raised_in("calling app:config"):
        raise BreadError(INVALID_REQUEST, "no such agent")
    assert str(raised.value).startswith("calling app:config raised BreadError INVALID_REQUEST: no such agent (")


def test_a_traceback_only_through_pythons_library_names_no_place():
    try:
        os.environ["BREAD_TEST_NEVER_SET"]
    except KeyError as exc:
        in_os = exc.with_traceback(exc.__traceback__.tb_next)  # without this test's own frame
    assert raised_at(in_os) is None
