"""The gateway's :class:`~connectors.oauth.port.AuthorizationBroker`: a person's part of an
authorization-code grant, behind ``/oauth/start/{id}`` and ``/oauth/callback``.

A connector calls :meth:`GatewayBroker.begin` with the authorization URL it built (PKCE,
``state``, ``resource``) and a ``redeem`` coroutine; it gets ``{public_url}/oauth/start/{id}`` to
give the person (a URL-mode elicitation). The ``id`` is unguessable (256 random bits after the
replica's name), **single use** and expires with the authorization (``ttl_s``, at most
``oauth.start_ttl_s``). :meth:`start` answers the redirect to the authorization URL (or a refusal);
:meth:`callback`, in this order:

1. finds the pending authorization by ``state`` (unknown or expired: refused, nothing stored) and
   forgets it (a ``state`` is used once, whatever follows);
2. checks ``iss`` by exact string comparison (RFC 9207 §2.4, no normalisation): whenever present it
   must equal the issuer the authorization was sent to (``expected_issuer``, else the grant's);
   absent, it is refused when the server advertises it (``iss_required``); on a mismatch nothing
   of the response is acted on or shown, ``error`` included;
3. an ``error`` response is reported; else ``redeem(code)`` runs, the grant is stored under its
   :class:`GrantKey`, and :meth:`wait` wakes.

Every outcome is a :class:`Page` (status, title, text) or a :class:`Redirect`: :mod:`.routes`
renders them. A failed authorization also wakes :meth:`wait` (with no grant), so the call waiting
for it fails at once instead of at its timeout.

**Replicas** (``state.store`` Redis): the redeem coroutine lives in the process of the connector
that began. The start id names its replica; the ``state`` is recorded in the shared store
(``oauth.<digest>`` → replica, with the authorization's TTL) before the start link redirects. A
start or callback landing on another replica is sent to the owner over the bus
(:class:`~gateway.state.bus.Bus`, kinds ``oauth_start`` and ``oauth_callback``), which answers it;
an owner that is gone is known at once (the person is asked to start again).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from connectors.oauth.port import Grant, GrantKey, TokenStore
from gateway.protocol.errors import RateLimited
from gateway.state.base import StateStore
from gateway.state.bus import Bus, ReplicaGone

__all__ = ["GatewayBroker", "Page", "Redirect", "START_KIND", "CALLBACK_KIND"]

log = logging.getLogger("gateway.oauth")

START_KIND = "oauth_start"
CALLBACK_KIND = "oauth_callback"
_ROUTE_TIMEOUT_S = 30.0  # a routed callback includes the owner's token request


@dataclass(frozen=True, slots=True)
class Page:
    status: int
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class Redirect:
    location: str


Outcome = Page | Redirect


@dataclass(slots=True)
class _Pending:
    start_id: str
    state: str
    key: GrantKey
    expected_issuer: str | None
    iss_required: bool
    authorization_url: str
    redeem: Callable[[str], Awaitable[Grant]]
    expires: float  # time.monotonic()
    recorded: asyncio.Task[bool] | None = field(default=None, repr=False)


def _state_record_id(state: str) -> str:
    # The shared record is named by a digest: the state itself never sits in Redis.
    return "oauth." + hashlib.sha256(state.encode()).hexdigest()[:32]


class GatewayBroker:
    """Pending authorizations of this replica, and the routing of starts and callbacks."""

    def __init__(self, store: TokenStore, public_url: str, *, state: StateStore | None = None,
                 bus: Bus | None = None, max_ttl_s: float = 600.0, max_pending: int = 10_000,
                 user_header: str | None = None) -> None:
        self.store = store
        self.public_url = public_url.rstrip("/")
        self.replica = state.replica if state is not None else secrets.token_hex(5)
        self._state = state if state is not None and state.shared else None
        self._bus = bus if self._state is not None else None
        self.max_ttl_s = max_ttl_s
        self.max_pending = max_pending
        self.user_header = user_header
        self._by_start: dict[str, _Pending] = {}
        self._by_state: dict[str, _Pending] = {}
        self._done: dict[GrantKey, asyncio.Event] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        if self._bus is not None:
            self._bus.on(START_KIND, self._routed)
            self._bus.on(CALLBACK_KIND, self._routed)

    # -- the AuthorizationBroker protocol ---------------------------------------------------------
    def begin(self, *, key: GrantKey, authorization_url: str, state: str, expected_issuer: str | None,
              redeem: Callable[[str], Awaitable[Grant]], ttl_s: float = 600.0,
              iss_required: bool | None = None) -> str:
        """``expected_issuer``: the issuer the authorization was sent to (None: the key's);
        ``iss_required``: the server advertises ``authorization_response_iss_parameter_supported``
        (None, from a caller that does not say: required when ``expected_issuer`` is given)."""
        now = time.monotonic()
        self._purge(now)
        if state in self._by_state:
            raise ValueError("this state is already pending: each authorization needs a new one")
        if len(self._by_state) >= self.max_pending:
            raise RateLimited(f"too many OAuth authorizations are waiting for a person (oauth.max_pending = "
                              f"{self.max_pending}); try again later", 5000, "oauth")
        ttl = min(ttl_s, self.max_ttl_s)
        start_id = f"{self.replica}.{secrets.token_urlsafe(32)}"
        required = expected_issuer is not None if iss_required is None else iss_required
        pending = _Pending(start_id, state, key, expected_issuer, required, authorization_url, redeem, now + ttl)
        self._by_start[start_id] = pending
        self._by_state[state] = pending
        event = self._done.get(key)
        if event is None or event.is_set():  # a new round: wait() waits for this one's callback
            self._done[key] = asyncio.Event()
        if self._state is not None:
            record = {"replica": self.replica, "connector": key.connector, "principal": key.principal}
            pending.recorded = self._spawn(self._record(state, record, ttl))
        return f"{self.public_url}/oauth/start/{start_id}"

    async def wait(self, key: GrantKey, timeout: float) -> Grant | None:
        event = self._done.setdefault(key, asyncio.Event())
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            return None
        return await self.store.get(key)

    # -- /oauth/start/{id} --------------------------------------------------------------------------
    async def start(self, start_id: str, user: str | None = None) -> Outcome:
        """The redirect for a start link (``user``: the ``user_header`` value, when configured)."""
        owner = start_id.partition(".")[0]
        if owner != self.replica and re.fullmatch(r"[0-9a-f]{10}", owner):
            return await self._route(owner, START_KIND, {"id": start_id, "user": user})
        pending = self._by_start.pop(start_id, None)
        if pending is None or pending.expires < time.monotonic():
            return Page(400, "Link expired", "This authorization link was already used or has expired. "
                                             "Ask for the tool again to get a new one.")
        if self.user_header is not None and user != pending.key.principal:
            # The link is given back intact: its rightful owner may still open it.
            self._by_start[start_id] = pending
            return Page(403, "Not your authorization", "This authorization link was made for another "
                                                       "user. Open your own link.")
        # The callback may land on any replica: it is recorded before the person is sent on.
        if pending.recorded is not None and not await pending.recorded:
            self._forget(pending, failed=True)
            return Page(503, "Try again", "The gateway could not record this authorization. "
                                          "Ask for the tool again to get a new link.")
        return Redirect(pending.authorization_url)

    # -- /oauth/callback -----------------------------------------------------------------------------
    async def callback(self, query: dict[str, str]) -> Outcome:
        state = query.get("state")
        if not state:
            return Page(400, "Authorization failed", "The response has no state: it does not belong to an "
                                                     "authorization this gateway started. Nothing was stored.")
        if state not in self._by_state and self._state is not None:
            owner = await self._owner_of(state)
            if owner is not None and owner != self.replica:
                return await self._route(owner, CALLBACK_KIND, {"query": query})
        return await self._complete(state, query)

    async def _complete(self, state: str, query: dict[str, str]) -> Outcome:
        pending = self._by_state.get(state)
        if pending is None or pending.expires < time.monotonic():
            if pending is not None:
                self._forget(pending, failed=True)
            return Page(400, "Authorization failed", "This authorization is unknown or has expired. Nothing "
                                                     "was stored; ask for the tool again to get a new link.")
        self._forget(pending)  # a state is used once, whatever happens next
        iss = query.get("iss")
        expected = pending.expected_issuer or pending.key.issuer
        if (iss is None and pending.iss_required) or (iss is not None and iss != expected):
            # The operator's only clue (the page says nothing of the response): which, and why.
            log.warning("OAuth callback for connector %s refused: %s", pending.key.connector,
                        "no iss, which its server advertises" if iss is None else
                        f"iss {iss[:200]!r} is not the issuer {expected!r} the authorization was sent to")
            self._wake(pending.key)
            # RFC 9207: on a mismatch nothing of the response (error included) is acted on or shown.
            return Page(400, "Authorization failed", "The response did not come from the authorization server "
                                                     "this authorization was sent to (iss). Nothing was stored.")
        if "error" in query:
            self._wake(pending.key)
            text = query.get("error_description") or query["error"]
            return Page(400, "Authorization refused",
                        f"The authorization server answered: {query['error']} ({text[:300]}). Nothing was stored.")
        code = query.get("code")
        if not code:
            self._wake(pending.key)
            return Page(400, "Authorization failed", "The response has no code. Nothing was stored.")
        try:
            grant = await pending.redeem(code)
        except Exception as exc:
            self._wake(pending.key)
            log.warning("OAuth code for connector %s could not be redeemed: %s", pending.key.connector,
                        type(exc).__name__)
            detail = str(exc)[:300] or type(exc).__name__
            return Page(400, "Authorization failed", f"The code could not be redeemed: {detail}. Nothing was stored.")
        await self.store.put(pending.key, grant)
        self._done.setdefault(pending.key, asyncio.Event()).set()
        log.info("OAuth grant stored for connector %s, principal %s", pending.key.connector,
                 pending.key.principal or "(service)")
        return Page(200, "Authorization complete",
                    f"{pending.key.connector} is authorized. You can close this page and return to your client.")

    # -- replicas -------------------------------------------------------------------------------------
    async def _record(self, state: str, record: dict[str, Any], ttl: float) -> bool:
        assert self._state is not None
        try:
            await self._state.save_session(_state_record_id(state), record, ttl)
        except Exception as exc:
            log.warning("recording a pending OAuth authorization failed: %s", type(exc).__name__)
            return False
        return True

    async def _owner_of(self, state: str) -> str | None:
        assert self._state is not None
        try:
            record = await self._state.load_session(_state_record_id(state))
        except Exception as exc:
            log.warning("looking up a pending OAuth authorization failed: %s", type(exc).__name__)
            return None
        return str(record["replica"]) if record and "replica" in record else None

    async def _route(self, owner: str, kind: str, body: dict[str, Any]) -> Outcome:
        gone = Page(400, "Authorization failed", "The gateway replica that started this authorization is gone. "
                                                 "Nothing was stored; ask for the tool again to get a new link.")
        if self._bus is None:
            return Page(400, "Link expired", "This authorization link is unknown or has expired. Ask for the "
                                             "tool again to get a new one.")

        async def no_events(_: dict[str, Any]) -> None:
            return None

        try:
            reply = await self._bus.ask(owner, kind, body, no_events, _ROUTE_TIMEOUT_S)
        except ReplicaGone:
            return gone
        except Exception as exc:
            log.warning("routing an OAuth %s to replica %s failed: %s", kind, owner, type(exc).__name__)
            return Page(503, "Try again", "The gateway replica holding this authorization cannot be reached.")
        if "location" in reply:
            return Redirect(str(reply["location"]))
        return Page(int(reply.get("status", 400)), str(reply.get("title", "")), str(reply.get("text", "")))

    def _routed(self, request: dict[str, Any]) -> None:
        self._spawn(self._serve_routed(request))

    async def _serve_routed(self, request: dict[str, Any]) -> None:
        assert self._bus is not None
        if request.get("t") == START_KIND:
            user = request.get("user")
            outcome = await self.start(str(request.get("id")), str(user) if user is not None else None)
        else:
            query = request.get("query")
            clean = {str(k): str(v) for k, v in query.items()} if isinstance(query, dict) else {}
            state = clean.get("state", "")
            outcome = await self._complete(state, clean) if state else await self.callback(clean)
        msg = {"location": outcome.location} if isinstance(outcome, Redirect) else \
            {"status": outcome.status, "title": outcome.title, "text": outcome.text}
        await self._bus.reply(request, msg)

    # -- bookkeeping ------------------------------------------------------------------------------------
    def _forget(self, pending: _Pending, failed: bool = False) -> None:
        self._by_start.pop(pending.start_id, None)
        self._by_state.pop(pending.state, None)
        if self._state is not None:
            self._spawn(self._drop_record(pending.state))
        if failed:
            self._wake(pending.key)

    async def _drop_record(self, state: str) -> None:
        assert self._state is not None
        try:
            await self._state.drop_session(_state_record_id(state))
        except Exception:  # it expires with its TTL anyway
            log.debug("dropping a pending OAuth record failed", exc_info=True)

    def _wake(self, key: GrantKey) -> None:
        # A failed authorization wakes the call waiting for it only when no other one for the same
        # grant is still pending (the person may have opened a newer link).
        if any(p.key == key for p in self._by_state.values()):
            return
        event = self._done.get(key)
        if event is not None:
            event.set()

    def _purge(self, now: float) -> None:
        for pending in [p for p in self._by_state.values() if p.expires < now]:
            self._forget(pending, failed=True)
        # Events of rounds long finished (set, nobody pending): their waiters have returned.
        waiting = {p.key for p in self._by_state.values()}
        for key in [k for k, e in self._done.items() if e.is_set() and k not in waiting]:
            del self._done[key]

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)
        self._by_start.clear()
        self._by_state.clear()  # their shared records expire with their TTL
