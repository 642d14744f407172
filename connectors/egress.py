"""The egress policy: where a connector may open connections, and which redirects it follows.

A connector that reaches a network (OpenAPI; MCP over HTTP) builds one
:class:`EgressPolicy` from its ``egress:`` config (:class:`~connectors.config.EgressConfig`) and
sends every request through it. The rules, in order, for each address a connection would go to:

1. an address in ``deny`` is refused, whatever else says;
2. a host named in ``allow_hosts`` (exactly, or by a ``*.suffix`` pattern) is allowed;
3. a public address is allowed;
4. a private one (loopback, RFC 1918, CGNAT 100.64/10, ULA fc00::/7) is allowed when a network in
   ``allow_private`` holds it, or when the URL names it as an IP literal that the connector's own
   config wrote for that origin (``trusted``: ``base_url: http://127.0.0.1:8080`` means what it says);
5. anything else is refused: link-local (169.254/16, fe80::/10, where the cloud metadata services
   live), the metadata addresses outside it, and non-routable ones (0.0.0.0/8, multicast,
   reserved). Only a name in ``allow_hosts`` unlocks those. Metadata host names
   (``metadata.google.internal`` ...) are refused before any DNS query, unless named.

An IPv6 address that carries an IPv4 one (``::ffff:a.b.c.d``, NAT64, 6to4) is judged as that IPv4
address.

Checked after DNS, connected to what was checked: a host name is resolved once, every address it
resolves to is checked (one refused address refuses the name: a DNS answer mixing a public and a
metadata address is an attack, not a fallback), and the connection goes to one of those addresses,
never to a second lookup of the name, so a DNS answer cannot change between the check and the
connect (rebinding). For aiohttp, :meth:`EgressPolicy.client_session` wires this in: a resolver
(names) plus a client middleware that checks each request's URL (scheme, IP literals and metadata
names, which aiohttp connects to without asking a resolver). A client with its own sockets calls
:meth:`EgressPolicy.create_connection` instead of ``loop.create_connection`` (or
:meth:`EgressPolicy.resolve`, then connects to an address it returned).

Redirects: :meth:`EgressPolicy.request` follows a redirect only when the request is a GET or HEAD
and the ``Location`` has the request's origin (scheme, host, port), at most ``max_redirects``
times; any other redirect raises :class:`RedirectRefused` before anything is sent to its target.
Credentials are the request's headers, so they never leave the origin they were configured for.

Refusals raise :class:`EgressRefused` (not an ``OSError``, so aiohttp lets it through unchanged);
a connector's exception edge translates it. ``str()`` of one is for operators (host, address,
rule and how to allow it); ``reason`` is a short phrase fit for a client.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from ssl import SSLContext
from typing import Any, TypeVar

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from connectors.config import BY_NAME_ONLY, EgressConfig, host_key

__all__ = [
    "EgressPolicy",
    "EgressRefused",
    "RedirectRefused",
    "Lookup",
    "system_lookup",
    "classify",
    "PUBLIC",
    "PRIVATE",
    "BY_NAME",
    "NON_ROUTABLE",
    "METADATA_NAMES",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_P = TypeVar("_P", bound=asyncio.BaseProtocol)
Lookup = Callable[[str, int, int], Awaitable[Sequence[str]]]
"""``await lookup(host, port, family)``: the addresses ``host`` resolves to (``family`` 0: any)."""

PUBLIC = "a public address"
PRIVATE = "a private address"
BY_NAME = "a link-local or cloud metadata address"
NON_ROUTABLE = "a non-routable address"

_PRIVATE = tuple(ipaddress.ip_network(n) for n in (
    "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "::1/128", "fc00::/7"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
METADATA_NAMES = frozenset({
    "metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal",
    "metadata.azure.internal", "metadata.tencentyun.com",
})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_FOLLOWED_METHODS = frozenset({"GET", "HEAD"})
_NUMERIC = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
_PASSED_MAX = 1024


class EgressRefused(Exception):
    """A connection or redirect the policy does not allow. ``reason`` is short and fit for a
    client; ``str()`` adds the host, the address and how to allow it, for operators."""

    def __init__(self, host: str, reason: str, *, address: str | None = None, hint: str = "") -> None:
        self.host = host
        self.reason = reason
        self.address = address
        self.hint = hint
        where = host if address is None or address == host else f"{host} ({address})"
        super().__init__(f"egress to {where} refused: {reason}" + (f"; {hint}" if hint else ""))


class RedirectRefused(EgressRefused):
    """A redirect that is not followed; ``status`` is the backend's 3xx, ``location`` its target."""

    def __init__(self, url: URL, status: int, location: str, reason: str) -> None:
        self.status = status
        self.location = location
        super().__init__(url.host or "", reason)
        self.args = (f"HTTP {status} redirect from {url.origin()} to {location[:200]} not followed: {reason}",)


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    return None


def _effective(ip: IPAddress) -> IPAddress:
    """The address a connection to ``ip`` really reaches, for the rules."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            ip = ipaddress.IPv6Address(str(ip).split("%")[0])
        return _embedded_v4(ip) or ip
    return ip


def classify(address: str | IPAddress) -> str:
    """Which class of address this is: :data:`PUBLIC`, :data:`PRIVATE`, :data:`BY_NAME`
    (link-local, metadata) or :data:`NON_ROUTABLE` (pure)."""
    ip = _effective(ipaddress.ip_address(address) if isinstance(address, str) else address)
    if any(ip in net for net in BY_NAME_ONLY):
        return BY_NAME
    if any(ip in net for net in _PRIVATE):
        return PRIVATE
    if not ip.is_global or ip.is_multicast or ip.is_unspecified or ip.is_reserved:
        return NON_ROUTABLE
    return PUBLIC


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _origin(url: URL) -> tuple[str, str, int | None]:
    return (url.scheme.lower(), host_key(url.raw_host or ""), url.port)


async def system_lookup(host: str, port: int, family: int = 0) -> list[str]:
    """The operating system's resolver (``getaddrinfo``), addresses in its order, once each."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, family=family, type=socket.SOCK_STREAM)
    out: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = str(sockaddr[0])
        if address not in out:
            out.append(address)
    return out


class EgressPolicy:
    """One connector's egress rules (see the module docstring). ``trusted`` are the URLs the
    connector's own config names (base URL, spec URL, upstream URL, token URL): those written with
    an IP literal may reach that private address, at that origin. With ``trust_names`` a host
    *name* in them is trusted the same way (its private addresses, at that origin; never
    link-local or metadata ones): for URLs nothing but the operator writes (an MCP upstream's
    ``url``), unlike a spec's ``servers``. ``lookup`` replaces the system resolver (tests map
    names to loopback addresses with it)."""

    def __init__(self, config: EgressConfig | None = None, *, trusted: Iterable[str | None] = (),
                 lookup: Lookup | None = None, trust_names: bool = False) -> None:
        config = config or EgressConfig()
        self.config = config
        self.max_redirects = config.max_redirects
        self._allow_private = tuple(ipaddress.ip_network(n) for n in config.allow_private)
        self._deny = tuple(ipaddress.ip_network(n) for n in config.deny)
        self._hosts = frozenset(h for h in config.allow_hosts if not h.startswith("*."))
        self._suffixes = tuple(h[1:] for h in config.allow_hosts if h.startswith("*."))
        self._lookup: Lookup = lookup or system_lookup
        trusted_origins: set[tuple[str, int | None]] = set()
        for raw in trusted:
            if not raw:
                continue
            try:
                url = URL(raw)
            except ValueError:
                continue
            host = host_key(url.raw_host or "")
            if url.scheme in ("http", "https") and (trust_names or _literal(host) is not None):
                trusted_origins.add((host, url.port))
        self._trusted = frozenset(trusted_origins)
        self._passed: set[tuple[str, str | None, int | None]] = set()

    # -- the rules (pure) --------------------------------------------------------------------
    def named(self, host: str) -> bool:
        """Whether ``allow_hosts`` names this host."""
        key = host_key(host)
        return key in self._hosts or any(key.endswith(s) for s in self._suffixes)

    def check_address(self, host: str, address: str, port: int | None = None) -> None:
        """Raise :class:`EgressRefused` unless a connection for ``host`` may go to ``address``."""
        key = host_key(host)
        raw = ipaddress.ip_address(address)
        ip = _effective(raw)
        if any(ip in net or raw in net for net in self._deny):
            raise EgressRefused(key, "a denied address", address=address, hint="egress.deny holds it")
        if self.named(key):
            return
        kind = classify(ip)
        if kind == PUBLIC:
            return
        if kind == PRIVATE:
            if any(ip in net for net in self._allow_private):
                return
            if (key, port) in self._trusted:  # an IP literal (or, with trust_names, the name) as configured
                return
            raise EgressRefused(key, kind, address=address, hint="allow its network in egress.allow_private "
                                "(or the host in egress.allow_hosts)")
        raise EgressRefused(key, kind, address=address, hint="allowed only by host name, in egress.allow_hosts")

    def check_host(self, host: str, port: int | None = None) -> None:
        """The checks that need no DNS: an IP literal is checked as an address, a metadata host
        name is refused unless named."""
        key = host_key(host)
        if not key:
            raise EgressRefused(host, "a URL without a host")
        if _literal(key) is not None:
            self.check_address(key, key, port)
        elif key in METADATA_NAMES and not self.named(key):
            raise EgressRefused(key, "a cloud metadata host name", hint="allowed only by name, in egress.allow_hosts")

    def check_url(self, url: str | URL) -> None:
        """Scheme (http, https) and :meth:`check_host` for ``url``. Runs before every request, so
        origins that passed are remembered (the rules never change for one policy)."""
        u = URL(url) if isinstance(url, str) else url
        origin = (u.scheme, u.raw_host, u.port)
        if origin in self._passed:
            return
        if u.scheme not in ("http", "https"):
            raise EgressRefused(u.host or str(u)[:100], f"a {u.scheme or 'relative'} URL (only http and https)")
        self.check_host(u.raw_host or "", u.port)
        if len(self._passed) >= _PASSED_MAX:
            self._passed.clear()
        self._passed.add(origin)

    # -- resolving ---------------------------------------------------------------------------
    async def resolve(self, host: str, port: int, family: int = 0) -> list[str]:
        """The addresses to connect to for ``host``, every one checked. Connect to one of these,
        never to ``host`` again (a second lookup could answer differently). Raises
        :class:`EgressRefused`, or the lookup's ``OSError`` (``socket.gaierror``)."""
        self.check_host(host, port)
        key = host_key(host)
        if _literal(key) is not None:
            return [key]
        addresses = list(await self._lookup(host.rstrip("."), port, family))
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} has no address")
        for address in addresses:
            self.check_address(key, address, port)
        return addresses

    async def create_connection(self, protocol_factory: Callable[[], _P], host: str, port: int, *,
                                ssl: SSLContext | None = None) -> tuple[asyncio.Transport, _P]:
        """``loop.create_connection`` for a client with its own sockets: ``host`` resolved and
        checked by :meth:`resolve`, each checked address tried in turn; TLS still verifies ``host``
        (SNI and the certificate's name)."""
        loop = asyncio.get_running_loop()
        server_hostname = host_key(host) if ssl is not None else None
        failure: OSError | None = None
        for address in await self.resolve(host, port):
            try:
                return await loop.create_connection(protocol_factory, address, port, ssl=ssl,
                                                    server_hostname=server_hostname)
            except OSError as exc:
                failure = exc
        assert failure is not None  # resolve() returns at least one address
        raise failure

    # -- aiohttp -----------------------------------------------------------------------------
    def client_session(self, *, limit: int = 100, keepalive_timeout: float = 15.0,
                       **session_kwargs: Any) -> aiohttp.ClientSession:
        """An ``aiohttp.ClientSession`` whose every connection obeys this policy (its resolver and
        middleware). Send requests with :meth:`request`, or with ``allow_redirects=False``: aiohttp's
        own redirect handling would carry headers across origins. Call it in a running loop."""
        connector = aiohttp.TCPConnector(limit=limit, keepalive_timeout=keepalive_timeout,
                                         resolver=_Resolver(self))
        return aiohttp.ClientSession(connector=connector, middlewares=(self._guard,), trust_env=False,
                                     **session_kwargs)

    async def _guard(self, req: aiohttp.ClientRequest,
                     handler: Callable[[aiohttp.ClientRequest], Awaitable[aiohttp.ClientResponse]]
                     ) -> aiohttp.ClientResponse:
        """Every request (each redirect hop too), before its connection is made."""
        self.check_url(req.url)
        return await handler(req)

    @contextlib.asynccontextmanager
    async def request(self, session: aiohttp.ClientSession, method: str, url: str | URL,
                      **kwargs: Any) -> AsyncIterator[aiohttp.ClientResponse]:
        """``async with policy.request(session, "GET", url, headers=...) as resp:`` — one request
        that follows redirects by the rule (same origin, GET/HEAD, at most ``max_redirects``) and
        raises :class:`RedirectRefused` for any other, before anything is sent to its target."""
        current = URL(url) if isinstance(url, str) else url
        method = method.upper()
        hops = 0
        while True:
            resp = await session.request(method, current, allow_redirects=False, **kwargs)
            try:
                target = self._redirect(method, current, resp, hops)
            except BaseException:
                resp.release()
                raise
            if target is None:
                try:
                    yield resp
                finally:
                    resp.release()
                return
            resp.release()
            current, hops = target, hops + 1

    def _redirect(self, method: str, url: URL, resp: aiohttp.ClientResponse, hops: int) -> URL | None:
        """Where to go next, None when ``resp`` is the answer; raises for a redirect not followed."""
        location = resp.headers.get("Location")
        if resp.status not in _REDIRECTS or location is None:
            return None
        if method not in _FOLLOWED_METHODS:
            raise RedirectRefused(url, resp.status, location, f"{method} requests are not redirected "
                                  "(only GET and HEAD are)")
        try:
            target = url.join(URL(location))
        except ValueError:
            raise RedirectRefused(url, resp.status, location, "the Location is not a URL") from None
        if _origin(target) != _origin(url):
            raise RedirectRefused(url, resp.status, location, "the target is another origin (only the same "
                                  "scheme, host and port are followed)")
        if hops >= self.max_redirects:
            raise RedirectRefused(url, resp.status, location,
                                  f"more than egress.max_redirects = {self.max_redirects} redirects")
        return target


class _Resolver(AbstractResolver):
    """aiohttp's resolver seam: names resolved and checked by the policy; aiohttp connects to the
    addresses returned (it asks again only when its DNS cache entry expires, and checks again)."""

    def __init__(self, policy: EgressPolicy) -> None:
        self._policy = policy

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
                      ) -> list[ResolveResult]:
        addresses = await self._policy.resolve(host, port, int(family))
        return [ResolveResult(hostname=host, host=a, port=port,
                              family=socket.AF_INET6 if ":" in a else socket.AF_INET, proto=0, flags=_NUMERIC)
                for a in addresses]

    async def close(self) -> None:
        return None
