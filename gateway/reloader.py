"""Config hot reload from the file: on SIGHUP and when the file's content changes.

:class:`ConfigReloader` re-reads the config file, validates it and hands it to
:meth:`Gateway.reload` (which restarts only the connectors that changed; sessions stay connected
and receive list_changed). A file that does not validate, or a reload the gateway refuses (a name
collision), is logged as one clear line naming the problem and counted in
``config_reloads_total{result="failed"}``; the running config keeps serving. A new
``gateway.log_level`` or ``log_format`` re-configures logging.

:meth:`ConfigReloader.watch` polls the file every ``interval`` seconds and reloads when its bytes
change (a hash, not the mtime alone: Kubernetes swaps ConfigMap files through a symlink, editors
rewrite files in place, and clocks lie). Polling costs one ``read`` per interval and needs no
inotify, which is unreliable on container overlay filesystems.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from gateway.config import GatewayConfig, load_config
from gateway.protocol.errors import ConfigError
from gateway.telemetry import metrics

__all__ = ["ConfigReloader", "Reloadable", "DEFAULT_POLL_S"]

log = logging.getLogger("gateway.reload")
DEFAULT_POLL_S = 2.0


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


class Reloadable(Protocol):
    """What a reload needs of the running gateway (:class:`gateway.app.Gateway` implements it)."""

    @property
    def config(self) -> GatewayConfig: ...

    async def reload(self, new: GatewayConfig) -> dict[str, list[str]]: ...


class ConfigReloader:
    """Reloads ``path`` into ``gateway``; ``adjust`` re-applies command-line overrides (host, port)."""

    def __init__(self, gateway: Reloadable, path: str | Path,
                 adjust: Callable[[GatewayConfig], GatewayConfig] | None = None) -> None:
        self.gateway = gateway
        self.path = Path(path)
        self.adjust = adjust
        self.digest = _digest(self.path)
        self._lock = asyncio.Lock()

    async def reload(self, reason: str = "SIGHUP") -> bool:
        """Load, validate and apply the file; False (old config kept) when anything is wrong."""
        async with self._lock:  # a SIGHUP during a file-triggered reload waits its turn
            self.digest = _digest(self.path)
            try:
                new = load_config(self.path)
                if self.adjust is not None:
                    new = self.adjust(new)
                old = self.gateway.config.gateway
                result = await self.gateway.reload(new)
            except ConfigError as exc:
                metrics.CONFIG_RELOADS.labels("failed").inc()
                log.error("config reload (%s) refused, keeping the running config: %s", reason,
                          str(exc).replace("\n", "; "))
                return False
            except Exception as exc:
                metrics.CONFIG_RELOADS.labels("failed").inc()
                log.exception("config reload (%s) failed, keeping the running config: %s", reason, exc)
                return False
            metrics.CONFIG_RELOADS.labels("ok").inc()
            if (old.log_level, old.log_format) != (new.gateway.log_level, new.gateway.log_format):
                from gateway.telemetry import logging as gw_logging

                gw_logging.configure(new)
            metrics.CONFIG_LAST_RELOAD.set_to_current_time()
            log.info("config reloaded (%s): started %s, stopped %s, kept %s", reason,
                     result.get("started"), result.get("stopped"), result.get("kept"))
            return True

    async def watch(self, interval: float = DEFAULT_POLL_S) -> None:
        """Poll the file until cancelled; reload when its content changed."""
        while True:
            await asyncio.sleep(interval)
            digest = await asyncio.to_thread(_digest, self.path)
            if digest is not None and digest != self.digest:
                await self.reload("file changed")
