"""The blob store contract, over every implementation: a file put is got back, bytes and
metadata; its metadata alone is read without its bytes; a url that names none of the store's
files is none."""

import time

import pytest

from bread_sync.blobs import BLOB_STORES, URL_PREFIX, blob_id, meta_of
from bread_sync.loading import resolve

PNG = b"\x89PNG\r\n\x1a\n a picture of a cat"
UNKNOWN = URL_PREFIX + "0" * 32
NOT_OURS = ("/files/../secret", "/files/x", "https://example.com/cat.png", "")


@pytest.fixture(params=sorted(BLOB_STORES))
def blobs(request, tmp_path):
    opts = {"filesystem": {"root": tmp_path / "files"}, "memory": {}}[request.param]
    return resolve(request.param, BLOB_STORES, "store", **opts)


def test_a_file_put_is_got_back_with_its_metadata(blobs):
    stored = blobs.put(PNG, "image/png", "cat.png", owner="alice")

    assert stored == {"url": stored["url"], "mimeType": "image/png", "name": "cat.png", "size": len(PNG),
                      "owner": "alice"}  # fmt: skip
    assert stored["url"].startswith(URL_PREFIX)
    assert blobs.get(stored["url"]) == (PNG, stored)


def test_its_metadata_alone_is_what_get_gives_with_the_bytes(blobs):
    stored = blobs.put(PNG, "image/png", owner=None)

    assert blobs.meta(stored["url"]) == blobs.get(stored["url"])[1] == stored
    assert meta_of(blobs, stored["url"]) == stored


def test_metadata_read_is_a_copy_the_caller_may_change(blobs):
    stored = blobs.put(PNG, "image/png", owner="alice")

    blobs.meta(stored["url"])["owner"] = None

    assert blobs.meta(stored["url"])["owner"] == "alice"


@pytest.mark.parametrize("url", [UNKNOWN, *NOT_OURS])
def test_a_url_naming_none_of_its_files_has_no_file_and_no_metadata(blobs, url):
    blobs.put(PNG, "image/png")

    assert blobs.get(url) is None
    assert blobs.meta(url) is None


def test_an_id_is_the_whole_name_a_trailing_newline_is_not_one():
    assert blob_id(UNKNOWN) == "0" * 32
    assert blob_id(UNKNOWN + "\n") is None


def test_a_purged_file_is_gone_bytes_and_metadata(blobs):
    kept, purged = blobs.put(b"kept", "text/plain"), blobs.put(PNG, "image/png")

    assert blobs.purge(time.time() + 1, keep=[kept["url"]]) == 1

    assert blobs.get(purged["url"]) is None and blobs.meta(purged["url"]) is None
    assert blobs.meta(kept["url"]) == kept


def test_a_store_that_stored_nothing_gets_and_purges_nothing(blobs):
    assert blobs.get(UNKNOWN) is None and blobs.meta(UNKNOWN) is None
    assert blobs.purge(time.time() + 1) == 0


def test_the_filesystem_store_makes_its_folder_with_its_first_file(tmp_path):
    root = tmp_path / "instance" / "files"
    blobs = resolve("filesystem", BLOB_STORES, "store", root=root)
    blobs.purge(time.time() + 1)
    assert not (tmp_path / "instance").exists()  # an app that stores no file writes nothing to disk

    stored = blobs.put(PNG, "image/png")

    assert blobs.get(stored["url"]) == (PNG, stored)


def test_the_filesystem_store_reads_metadata_without_opening_the_data_file(tmp_path):
    blobs = resolve("filesystem", BLOB_STORES, "store", root=tmp_path)
    stored = blobs.put(PNG, "image/png", owner="alice")
    data_file = tmp_path / stored["url"].removeprefix(URL_PREFIX)
    data_file.unlink()  # a read of it would fail (a chmod would not stop root)

    assert blobs.meta(stored["url"]) == stored


class PutGetOnly:
    """A user's blob store of the contract as the docs first spelled it: ``put`` and ``get``."""

    def __init__(self, inner):
        self.put, self.get = inner.put, inner.get


def test_a_store_without_meta_gives_its_metadata_through_get(blobs):
    stored = blobs.put(PNG, "image/png", owner="alice")

    assert meta_of(PutGetOnly(blobs), stored["url"]) == stored
    assert meta_of(PutGetOnly(blobs), UNKNOWN) is None
