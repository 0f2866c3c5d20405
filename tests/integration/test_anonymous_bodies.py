"""What a caller without a credential can make a real server read, and malformed request bodies,
with auth on (the same with auth off: test_hostile_input.py). docs/security.md promises that an
unauthenticated caller makes the server read at most ``max_body_bytes`` (1 MiB), on every route,
the larger limits of the A2A routes and of ``POST /files`` (16 MiB, for files) included; a
malformed body is a 400 before the credential is checked."""

from __future__ import annotations

import json
import socket

import pytest

from .bridges_auth_config import KEYS
from .servers import Server
from .test_hostile_input import MALFORMED_CHUNK_SIZES, assert_malformed_chunks_refused, port_of, read_answer

KEY = KEYS["alice"]
MAX_BODY_BYTES = 1_048_576
A2A_PATH = "/a2a"
#: A body past the server's own limit and within the A2A route's.
LARGE = 4 * MAX_BODY_BYTES
#: gunicorn reads a body at least 1 KiB at a time: a read of n bytes may wait for n + 1023.
READ_AHEAD = 1023


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    home = tmp_path_factory.mktemp("guarded")
    env = {"BREAD_CONFIG": "tests.integration.bridges_auth_config:config"}
    server = Server("guarded", home, home / "bread.db", env=env).start()
    yield server
    server.stop()


def send_part_of_a_body(
    server: Server, headers: str, declared: int, sent: int, path: str = A2A_PATH
) -> tuple[int, bytes]:
    """POST to ``path`` declaring ``declared`` bytes and sending only ``sent`` of them; the
    answer must come without the rest (a server waiting for it would time this out)."""
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=10) as sock:
        head = f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {declared}\r\n{headers}"
        sock.sendall(head.encode() + b"Connection: close\r\n\r\n" + b" " * sent)
        answer = read_answer(sock)
    return answer.status, answer.body


@pytest.mark.parametrize(("path", "headers"), [(A2A_PATH, ""), ("/files", "Content-Type: image/png\r\n")])
def test_an_anonymous_caller_is_answered_after_at_most_the_servers_limit(guarded, path, headers):
    status, body = send_part_of_a_body(
        guarded, headers, declared=LARGE, sent=MAX_BODY_BYTES + 1 + READ_AHEAD, path=path
    )
    assert status == 401, body
    assert json.loads(body)["error"]["code"] == "UNAUTHENTICATED"
    serves_with_key(guarded)


def test_a_caller_with_a_credential_may_send_up_to_the_routes_own_limit(guarded):
    message = {"kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}
    request = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    body = json.dumps(request).encode().ljust(2 * MAX_BODY_BYTES)  # JSON may end in spaces
    with socket.create_connection(("127.0.0.1", port_of(guarded)), timeout=30) as sock:
        head = (f"POST {A2A_PATH} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")  # fmt: skip
        sock.sendall(head.encode() + body)
        answer = read_answer(sock)
    assert answer.status == 200, answer.body[:500]
    assert answer.json()["result"]["status"]["state"] == "completed"


@pytest.mark.parametrize("size", MALFORMED_CHUNK_SIZES)
@pytest.mark.parametrize("credential", [False, True], ids=["anonymous", "with-key"])
def test_a_malformed_chunked_body_is_400_before_the_credential_check(guarded, size, credential):
    assert_malformed_chunks_refused(guarded, size, f"Authorization: Bearer {KEY}\r\n" if credential else "")
    serves_with_key(guarded)


def serves_with_key(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=10) as sock:
        sock.sendall(f"GET /agents HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}\r\n"
                     "Connection: close\r\n\r\n".encode())  # fmt: skip
        assert read_answer(sock).status == 200
