"""The webhook rule: which urls a webhook (an A2A push subscription, a run's webhook) may name,
and how a POST reaches one.

A url is read as the HTTP client reads it, so one it would refuse is refused when it is set. Its
host is resolved once per delivery, every address found is checked, and the POSTs connect to
those addresses by their number, under the url's name (its ``Host`` header, its TLS server
name): a name that answers a public address to the check and a loopback one to the connect
(DNS rebinding) never reaches the loopback."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import httpx

#: A webhook's connection must be made within this long: a host that is down is told quickly.
CONNECT_SECONDS = 2.0
#: Then each read of its answer (and each write of the POST) must take at most this long.
ANSWER_SECONDS = 10.0
DEFAULT_PORTS = {"http": 80, "https": 443}
JSON = "application/json"
#: IPv6 prefixes whose last 32 bits are the IPv4 address a packet to them reaches:
#: IPv4-compatible, IPv4-mapped, IPv4-translated (SIIT), NAT64's well-known prefix.
_CARRY_IPV4 = tuple(ipaddress.ip_network(n) for n in ("::/96", "::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96"))
#: Not global, though ``is_global`` says so on Python 3.11: site-local, NAT64 for local use.
_NOT_GLOBAL = tuple(ipaddress.ip_network(n) for n in ("fec0::/10", "64:ff9b:1::/48"))


class BadWebhook(ValueError):
    """A webhook url the sender could not call, or may not: its message says which."""


def public_address(text: str) -> bool:
    """Whether a packet to this address goes out to the internet only: it is global, and so is
    every IPv4 address it carries (6to4, Teredo, NAT64 and the IPv4 forms of IPv6)."""
    address = ipaddress.ip_address(text.split("%")[0])  # a link-local one's scope aside
    return all(_global(reached) for reached in _reached(address))


def _reached(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[Any]:
    if address.version == 4:
        return [address]
    reached = [address, address.sixtofour, *(address.teredo or ())]
    if any(address in prefix for prefix in _CARRY_IPV4):
        reached.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [a for a in reached if a is not None]


def _global(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return address.is_global and not address.is_multicast and not any(address in n for n in _NOT_GLOBAL)


def webhook_url(text: str) -> httpx.URL:
    """``text`` as the HTTP client reads it; BadWebhook unless it is an absolute http(s) url the
    client takes (no tab or other control character, a port from 1 to 65535)."""
    try:
        url = httpx.URL(text)
    except (httpx.InvalidURL, ValueError) as exc:  # idna's errors are ValueErrors
        raise BadWebhook(f"the webhook url is not a valid url: {exc}") from None
    if url.scheme not in DEFAULT_PORTS or not url.raw_host:
        raise BadWebhook("a webhook url must be an absolute http(s) url")
    if url.port is not None and not 0 < url.port < 65536:
        raise BadWebhook("a webhook url's port must be from 1 to 65535")
    return url


class Webhook:
    """A webhook url resolved once, its addresses checked (unless ``allow_private``): its POSTs
    go to those addresses, in order while they refuse the connection, and to nothing else."""

    def __init__(self, text: str, allow_private: bool):
        self.url = webhook_url(text)
        self.name = self.url.raw_host.decode("ascii")  # an IDNA name's ASCII form, as DNS and TLS know it
        self.origin = (self.url.scheme, self.name, self.url.port or DEFAULT_PORTS[self.url.scheme])
        self.addresses = _addresses(self.name, self.origin[2])
        if not allow_private and not all(public_address(a) for a in self.addresses):
            raise BadWebhook("a webhook url must not reach a loopback or private address")

    def post(self, client: httpx.Client, content: bytes, headers: dict[str, str]) -> int:
        """POST the JSON ``content`` and answer its status (the answer's body is never read)."""
        headers = {**headers, "Content-Type": JSON, "Host": self.url.netloc.decode("ascii")}
        name = {"sni_hostname": self.name}
        while True:
            url = self.url.copy_with(host=self.addresses[0])
            try:
                with client.stream("POST", url, content=content, headers=headers, extensions=name) as answer:
                    return answer.status_code
            except httpx.ConnectError:
                if len(self.addresses) == 1:
                    raise
                del self.addresses[0]  # refused or unreachable: the next one, for this POST and the later ones


def _addresses(name: str, port: int) -> list[str]:
    try:
        found = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except (OSError, ValueError):  # a label over 63 characters is a UnicodeError
        raise BadWebhook(f"the webhook host {name} does not resolve") from None
    return list(dict.fromkeys(info[4][0] for info in found))


def client(tls: Any) -> httpx.Client:
    """A client for one delivery: its connections are kept for that webhook's POSTs alone (one
    made to an address under one name never carries another name's). No proxy from the
    environment: the connection goes to the address that was checked."""
    timeout = httpx.Timeout(ANSWER_SECONDS, connect=CONNECT_SECONDS)
    return httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False, verify=tls)
