"""The gateway's MCP connector, with an ``oauth`` block, as the client under test of the
conformance suite's client ``auth/*`` scenarios.

``conformance client --command "python tests/conformance/auth_client.py"`` runs this with the
scenario server's URL appended and ``MCP_CONFORMANCE_CONTEXT`` in the environment. It:

1. writes a gateway config with one ``mcp`` connector (``streamable_http``, ``protocol: auto``)
   at that URL (``localhost`` kept: the resource the scenario's metadata names) with an ``oauth``
   block: ``identity: service``, the context's pre-registered client when it gives one
   (``client_id`` with ``client_secret``, or ``private_key_pem`` and ``signing_algorithm`` for
   ``private_key_jwt``), loopback egress allowed (the scenario's authorization server);
2. gives the connector an :class:`~connectors.oauth.port.OAuthPort` whose broker completes every
   authorization the way a person's browser would (:class:`FollowingBroker`): it opens the
   authorization URL without following redirects, reads the redirect to ``redirect_uri`` and
   hands its ``code``, ``state`` and ``iss`` to the broker's completion (which refuses a wrong or
   missing ``iss`` as the gateway's callback does; a refused one wakes the waiting connector,
   which then fails instead of waiting). URL-mode elicitations reaching the SDK client
   (``identity: user``) are completed the same way. The port's Client ID Metadata Document URL is
   the one the suite's CIMD scenario expects;
3. starts the gateway in-process and drives the scenario through it with an SDK 2.x client
   (:func:`tests.conformance.connector_client.drive`);
4. exits 0 when the gateway came up and the drive ran, 1 otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import aiohttp  # noqa: E402

from connectors.base import Connector  # noqa: E402
from connectors.oauth.port import Grant, LocalAuthorizationBroker, MemoryTokenStore, OAuthPort  # noqa: E402
from tests.conformance.connector_client import cli, run_scenario  # noqa: E402

__all__ = ["CIMD_URL", "REDIRECT_URI", "FollowingBroker", "follow", "gateway_config", "main"]

CIMD_URL = "https://conformance-test.local/client-metadata.json"
# Never requested: the broker reads the redirect's Location instead of following it.
REDIRECT_URI = "http://127.0.0.1:9/oauth/callback"


async def follow(url: str) -> tuple[str, str, str | None]:
    """Open an authorization URL as a browser would, up to the redirect back to the client:
    the ``code``, ``state`` and ``iss`` (None when absent) of that redirect."""
    async with aiohttp.ClientSession() as http, http.get(url, allow_redirects=False) as resp:
        location = resp.headers.get("Location")
    if not location:
        raise RuntimeError(f"the authorization endpoint answered HTTP {resp.status} without a redirect")
    query = parse_qs(urlsplit(location).query)
    iss = query.get("iss", [None])[0]
    return query["code"][0], query["state"][0], iss


class FollowingBroker(LocalAuthorizationBroker):
    """A broker whose person authorises at once (see the module doc)."""

    def __init__(self, store: MemoryTokenStore) -> None:
        super().__init__(store)
        self._tasks: set[asyncio.Task[Grant | None]] = set()

    def begin(self, **kwargs: Any) -> str:
        url = super().begin(**kwargs)
        task = asyncio.get_running_loop().create_task(self.authorise(url))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return url

    async def authorise(self, url: str) -> Grant | None:
        sent = parse_qs(urlsplit(url).query).get("state", [""])[0]
        pending = self._pending.get(sent)
        try:
            code, state, iss = await follow(url)
            return await self.complete(state, code, iss)
        except Exception as exc:  # a refused redirect (wrong iss ...) is the scenario's business
            print(f"authorization not completed: {type(exc).__name__}: {exc}")
            if pending is not None:  # the person is done: whoever waits learns now that no grant came
                self._done[pending[0]].set()
            return None


def gateway_config(url: str, context: dict[str, Any], identity: str = "service") -> str:
    # A refused authorization (a rejection scenario) wakes the waiter at once (FollowingBroker);
    # one that never answers is given up after 15 s, inside the suite's 30 s.
    oauth: dict[str, Any] = {"identity": identity, "redirect_uri": REDIRECT_URI, "authorization_timeout_s": 15}
    if context.get("client_id"):
        client: dict[str, Any] = {"client_id": context["client_id"]}
        if context.get("private_key_pem"):
            client |= {"auth_method": "private_key_jwt", "private_key": context["private_key_pem"],
                       "signing_algorithm": context.get("signing_algorithm") or "ES256"}
        elif context.get("client_secret"):
            client["client_secret"] = context["client_secret"]
        oauth["client"] = client
    entry = {"name": "scenario", "type": "mcp", "prefix": "", "transport": "streamable_http", "url": url,
             "protocol": "auto", "startup_wait_s": 20, "ping_interval_s": 0, "connect_timeout_s": 10,
             "egress": {"allow_private": ["127.0.0.0/8", "::1/128"]}, "oauth": oauth}
    return json.dumps({"audit": {"enabled": False}, "telemetry": {"metrics": False}, "connectors": [entry]})


async def _main(url: str) -> int:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    store = MemoryTokenStore()
    Connector.oauth_port = OAuthPort(store=store, broker=FollowingBroker(store), client_metadata_url=CIMD_URL)
    return await run_scenario(gateway_config(url, context), context)


def main(argv: list[str]) -> int:
    return cli(argv, _main)


if __name__ == "__main__":
    code = main(sys.argv)
    # Out at once: after a refused authorization the interpreter's shutdown was seen to linger
    # past the suite's client timeout (no Python frame left running); everything is flushed here.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
