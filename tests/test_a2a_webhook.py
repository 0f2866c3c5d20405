"""The A2A push webhook rule in process: which addresses are public (the IPv6 forms that carry an
IPv4 address unwrapped), a url the HTTP client would refuse refused when it is set, a name that
rebinds to loopback between the check and the connect never reached there, and a POST that
goes to the checked address under its own name. DNS and the network are the outside world
here: ``socket.getaddrinfo`` and ``socket.create_connection`` are replaced."""

from __future__ import annotations

import socket

import httpx
import pytest

from bread_sync.protocols.a2a import a2a_server
from bread_sync.protocols.a2a.push import A2APushes, sender_of
from bread_sync.webhooks.address import Webhook, public_address

from .test_a2a_plugin import Hook, message, rpc, serve

PUBLIC = "93.184.215.14"


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "10.0.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1", "::1", "::", "fe80::1%eth0",
        "fc00::1", "ff0e::1",
        "::127.0.0.1", "::ffff:127.0.0.1", "::ffff:0:7f00:1", "::ffff:0:a00:1",  # IPv4-compatible, -mapped, -translated
        "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::1",  # NAT64, and its prefix for local use
        "2002:7f00:1::1", "2002:a00:1::",  # 6to4 of 127.0.0.1, 10.0.0.1
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, its client 127.0.0.1
        "fec0::1",  # site-local
    ],
)  # fmt: skip
def test_an_address_that_reaches_no_further_than_a_private_network_is_not_public(address):
    assert not public_address(address)


@pytest.mark.parametrize("address", [PUBLIC, "8.8.8.8", "2001:4860:4860::8888", "64:ff9b::808:808", "2002:808:808::1"])
def test_a_global_address_is_public_and_so_are_its_ipv6_forms(address):
    assert public_address(address)


@pytest.fixture
def dns(monkeypatch):
    """A name in ``dns.answers`` resolves to its answers there, one per lookup, the last one from
    then on (an answer is addresses joined by commas); connections go nowhere but to 127.0.0.1,
    each recorded in ``dns.connects``."""

    class Dns:
        def __init__(self):
            self.answers: dict[str, list[str]] = {}
            self.connects: list[tuple] = []

    dns = Dns()
    real_lookup, real_connect = socket.getaddrinfo, socket.create_connection

    def lookup(host, port, *args, **kwargs):
        queue = dns.answers.get(host)
        if queue is None:
            return real_lookup(host, port, *args, **kwargs)
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in answer.split(",")]  # fmt: skip

    def connect(address, *args, **kwargs):
        dns.connects.append(address)
        if address[0] != "127.0.0.1":
            raise ConnectionRefusedError(f"no network here: {address}")
        return real_connect(address, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    monkeypatch.setattr(socket, "create_connection", connect)
    return dns


def subscribe(client, task_id, url):
    return client.post("/a2a", json=rpc("tasks/pushNotificationConfig/set", {
        "taskId": task_id, "pushNotificationConfig": {"id": "hook", "url": url}}))  # fmt: skip


def test_a_name_that_rebinds_to_loopback_after_the_check_is_never_connected_there(make_bread, dns):
    mount = a2a_server("echo", push_notifications=True)
    bread, client = serve(make_bread, mount)
    hook = Hook()
    try:
        port = hook.server.server_port
        task = client.post("/a2a", json=rpc("message/send", message("hi"))).get_json()["result"]
        dns.answers["rebind.example"] = [PUBLIC]
        assert subscribe(client, task["id"], f"http://rebind.example:{port}/").get_json()["result"]
        dns.answers["rebind.example"] = [PUBLIC, "127.0.0.1"]  # public to the check, loopback after
        sender = sender_of(bread)
        sender.mounts[mount.rpc_path] = A2APushes(mount)
        assert sender.step()
        assert hook.bodies == [] and dns.connects == [(PUBLIC, port)]  # only where the check looked
        (config,) = bread.store.list_push_configs(task["id"])
        assert config["attempts"] == 1 and "no network here" in config["lastError"]
    finally:
        hook.server.shutdown()
        hook.server.server_close()


BAD_URLS = ["http://pub\tlic.example/x", "http://public.example/\tx", "http://public.example:abc/",
            "http://public.example:70000/", "http://public.example:0/", "http://public.example:-1/"]  # fmt: skip


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_url_the_http_client_would_refuse_is_refused_when_it_is_set(make_bread, dns, url):
    dns.answers["public.example"] = dns.answers["pub\tlic.example"] = [PUBLIC]
    _, client = serve(make_bread, a2a_server("echo", push_notifications=True))
    task = client.post("/a2a", json=rpc("message/send", message("hi"))).get_json()["result"]
    answer = subscribe(client, task["id"], url)
    assert answer.status_code == 200 and answer.get_json()["error"]["code"] == -32602


def test_a_stored_url_the_client_refuses_is_a_failed_attempt_not_a_crash(make_bread):
    mount = a2a_server("echo", push_notifications=True, allow_private_webhooks=True)
    bread, client = serve(make_bread, mount)
    task = client.post("/a2a", json=rpc("message/send", message("hi"))).get_json()["result"]
    # As an older version of the plugin took it, or another writer of the store.
    bread.store.save_push_config({"taskId": task["id"], "id": "bad", "url": "http://127.0.0.1:9/\tx", "mount": "/a2a"})
    sender = sender_of(bread)
    sender.mounts[mount.rpc_path] = A2APushes(mount)
    assert sender.step()
    (config,) = bread.store.list_push_configs(task["id"])
    assert config["attempts"] == 1 and config["lastError"] and not config["done"]


def test_a_post_goes_to_the_checked_address_under_the_urls_name(dns):
    dns.answers["hook.example"] = [PUBLIC]
    webhook = Webhook("https://hook.example:8443/in?x=1", allow_private=False)
    dns.answers["hook.example"] = ["127.0.0.1"]  # no second lookup: the POST goes where the check looked
    seen = []

    def answer(request):
        seen.append(request)
        return httpx.Response(204)

    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        assert webhook.post(client, b'{"kind":"status-update"}', {"Authorization": "Bearer t"}) == 204
    (request,) = seen
    assert str(request.url) == f"https://{PUBLIC}:8443/in?x=1"
    assert request.headers["Host"] == "hook.example:8443" and request.headers["Authorization"] == "Bearer t"
    assert request.extensions["sni_hostname"] == "hook.example"  # the TLS server name, and the name verified


def test_an_address_that_refuses_gives_way_to_the_next_one_for_good(dns):
    hook = Hook()
    try:
        port = hook.server.server_port
        dns.answers["both.example"] = ["::1,127.0.0.1"]  # an AAAA and an A record
        webhook = Webhook(f"http://both.example:{port}/", allow_private=True)
        with httpx.Client(timeout=5) as client:
            assert webhook.post(client, b'{"n":1}', {}) == 204 and webhook.post(client, b'{"n":2}', {}) == 204
        assert hook.bodies == [{"n": 1}, {"n": 2}]
        assert dns.connects[0] == ("::1", port) and set(dns.connects[1:]) == {("127.0.0.1", port)}
    finally:
        hook.server.shutdown()
        hook.server.server_close()
