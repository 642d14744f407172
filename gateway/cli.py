"""Command line: the only module that parses argv.

    mcp-gateway serve --config F [--host H] [--port P]   HTTP transports (Streamable HTTP, SSE)
                      [--workers N]                       N processes on one port (needs state.store: redis)
    mcp-gateway stdio --config F [--endpoint NAME]        one session on stdin/stdout (of one endpoint)
    mcp-gateway validate F [--deep]                       exit 0, or every problem found and exit 2
                                                          (warnings: exit 0); --deep also starts every
                                                          connector whose entry passed and reaches every
                                                          backend: exit 1 on a failure
    mcp-gateway list F [--json] [--endpoint NAME]         the catalog (or what one endpoint serves), as
                                                          */list would send it; exit 1 when a connector
                                                          failed or is down, 2 for an endpoint's problems
    mcp-gateway audit query --config F ...                the audit log (gateway.audit.query_cli)
    mcp-gateway oauth list|revoke F ...                   upstream OAuth grants (gateway.oauth.cli)
    mcp-gateway --version

``serve`` handles SIGTERM (drain, then stop: readiness turns false at once) and SIGHUP (reload the
config file; an invalid file is refused and the old config keeps serving).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import signal
import socket
import sys
from typing import Any

from gateway.config import GatewayConfig, PathKey, load_config, locate
from gateway.protocol.errors import ConfigError

__all__ = ["main"]

log = logging.getLogger("gateway.cli")


def _configure_logging(config: GatewayConfig) -> None:
    from gateway.telemetry import logging as gateway_logging

    gateway_logging.configure(config)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mcp-gateway")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _load(path: str, lines: dict[PathKey, int] | None = None) -> GatewayConfig:
    try:
        return load_config(path, lines=lines)
    except ConfigError as exc:
        print(f"{path}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _setup_tracing(config: GatewayConfig) -> None:
    from gateway.telemetry import tracing

    tracing.configure(config.telemetry)


# Young-generation collections per allocated container (CPython's default is 700). A request
# allocates a few hundred short-lived objects, nearly all freed by reference counting: at 700 the
# collector ran every couple of requests and promoted whatever was in flight to older generations.
# At 20,000 it runs ~30x less often; ~4% fewer instructions per proxied call (callgrind,
# bench/proxy.py's stateless echo), for at most that many cyclic leftovers held a little longer.
_GC_YOUNG_THRESHOLD = 20_000


def _settle_heap() -> None:
    """After start-up: freeze what it loaded and collect the young generation less often.

    What start-up loaded (modules, config, catalog: most of the heap) lives as long as the process:
    frozen, the collector stops walking it, and a full collection under a connection flood takes a
    few ms instead of ~90 (a /healthz probe waited that long)."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(_GC_YOUNG_THRESHOLD, older, oldest)


async def _serve(args: argparse.Namespace) -> int:
    from gateway.app import Gateway
    from gateway.transports.http_app import build_app
    from gateway.transports.http_server import start_server

    config = _load(args.config)
    http = config.gateway.http
    host = args.host or http.host
    port = http.port if args.port is None else args.port
    if args.host or args.port is not None:
        config = config.model_copy(update={"gateway": config.gateway.model_copy(
            update={"http": http.model_copy(update={"host": host, "port": port})})})
    _configure_logging(config)
    _setup_tracing(config)
    gateway = Gateway(config)
    if args.metrics_fd is not None:  # a worker of serve --workers N (gateway/workers.py)
        gateway.metrics_socket = socket.socket(fileno=args.metrics_fd)
    if args.metrics_aggregate:
        from gateway.telemetry.http import use_aggregate

        use_aggregate(args.metrics_aggregate)
    await gateway.start()
    app = build_app(gateway)
    _settle_heap()
    # One access-log line per HTTP request duplicates the audit log and metrics at a real cost per
    # call: aiohttp's access log is on only at log_level debug.
    access_log = logging.getLogger("aiohttp.access") if config.gateway.log_level == "debug" else None
    # Connection limits and header/keep-alive timeouts from gateway.http, read per connection.
    # Calls are waited for by gateway.drain (shutdown_grace_s): the server's own shutdown only lets a
    # response on its way out finish (CLOSE_WAIT_S), it must not wait on an unread body (10-20 s).
    try:
        runner = await start_server(app, lambda: gateway.config.gateway.http, host, port, access_log=access_log,
                                    reuse_port=args.reuse_port)
    except OSError as exc:  # the port is taken or not ours: said once, as a config problem (exit 2)
        await gateway.stop(grace_s=0)
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", "gateway.http.port") from None
    if args.ready_fd is not None:  # tell the supervisor this worker serves (it restarts only those)
        os.write(args.ready_fd, b"ready\n")
        os.close(args.ready_fd)
    bound = runner.addresses[0][1] if runner.addresses else port
    gateway.oauth.serving_at(f"http://{host}:{bound}")  # authorization links, unless oauth.public_url is set
    log.info("serving MCP on http://%s:%s/mcp (Streamable HTTP) and /sse (legacy SSE)", host, bound)
    print(f"mcp-gateway listening on http://{host}:{bound}/mcp", file=sys.stderr, flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    from gateway.reloader import ConfigReloader

    def keep_overrides(new: GatewayConfig) -> GatewayConfig:
        if args.host or args.port is not None:
            return new.model_copy(update={"gateway": new.gateway.model_copy(update={"http": config.gateway.http})})
        return new

    reloader = ConfigReloader(gateway, args.config, keep_overrides)
    # Reload when the file changes (a ConfigMap update, an edit); 0 turns polling off.
    watcher = asyncio.create_task(reloader.watch(args.reload_poll)) if args.reload_poll > 0 else None

    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    loop.add_signal_handler(signal.SIGHUP, lambda: gateway.spawn(reloader.reload("SIGHUP")))
    await stop.wait()
    if watcher is not None:
        watcher.cancel()
    log.info("shutting down: draining in-flight requests (grace %.1fs)", config.gateway.shutdown_grace_s)
    await gateway.drain()
    await runner.shutdown()
    await gateway.stop(grace_s=0)
    await runner.cleanup()
    return 0


async def _stdio(args: argparse.Namespace) -> int:
    from gateway.app import Gateway
    from gateway.context import Principal
    from gateway.transports.stdio import serve_stdio

    config = _load(args.config)
    _configure_logging(config)
    if config.audit.jsonl == "stdout":
        # stdout carries the protocol and nothing else: the audit mirror moves to stderr.
        log.warning("audit.jsonl is stdout; under stdio the audit mirror is written to stderr instead")
        config = config.model_copy(update={"audit": config.audit.model_copy(update={"jsonl": "stderr"})})
    _setup_tracing(config)
    gateway = Gateway(config)
    gateway.metrics_port_optional = True  # the HTTP gateway of the same config may hold the port
    principal = Principal(config.auth.stdio_principal, kind="stdio")
    endpoint = _endpoint_config(config, args.endpoint, args.config)
    if endpoint is not None and not endpoint.admits(principal.name, principal.groups):
        print(f"{args.config}: auth.stdio_principal {principal.name!r} is not among the principals of endpoint "
              f"{endpoint.name!r}", file=sys.stderr)
        return 2
    await gateway.start()
    _settle_heap()
    try:
        host = gateway if endpoint is None else gateway.endpoints.get(endpoint.name)
        assert host is not None
        await serve_stdio(host, principal, config.gateway.shutdown_grace_s, modern=host)
    finally:
        await gateway.stop(grace_s=0)
    return 0


def _endpoint_config(config: GatewayConfig, name: str | None, path: str) -> Any:
    """The ``endpoints:`` entry named ``name`` (None for no name); exit 2 naming the choices."""
    if name is None:
        return None
    for endpoint in config.endpoints:
        if endpoint.name == name:
            return endpoint
    names = ", ".join(e.name for e in config.endpoints) or "none is configured"
    print(f"{path}: no endpoint is named {name!r} ({names})", file=sys.stderr)
    raise SystemExit(2)


async def _list(args: argparse.Namespace) -> int:
    from gateway.app import Gateway

    lines: dict[PathKey, int] = {}
    config = _load(args.file, lines)
    endpoint = _endpoint_config(config, args.endpoint, args.file)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    gateway = Gateway(config)
    await gateway.start(serving=False)
    problems = 0
    try:
        view = gateway.catalog
        if endpoint is not None:
            host = gateway.endpoints.get(endpoint.name)
            assert host is not None
            view = host.view
            index = config.endpoints.index(endpoint)
            for problem in host.view.selection.problems:  # what validate cannot see without the catalog
                where, line = locate(("endpoints", index, *problem.path), lines)
                print(f"{args.file}: {where}{f' (line {line})' if line else ''}: {problem.message}", file=sys.stderr)
                problems += 1
        listing: dict[str, list[dict[str, Any]]] = {}
        for key in ("tools", "resources", "resourceTemplates", "prompts"):
            listing[key] = [e.wire for e in view.snapshot(key).entries]
        if endpoint is not None and endpoint.discovery == "search":
            print(f"endpoint {endpoint.name} (discovery: search) lists find_tools and call_tool; they find "
                  "and call these:", file=sys.stderr)
        # What a backend offers that its connector leaves out on purpose (an upstream tool with an
        # invalid x-mcp-header, include/exclude, a rename clash): said here, not only in a log.
        left_out = [{"connector": name, "kind": item.kind, "name": item.name, "rule": item.rule,
                     "reason": item.reason}
                    for name, connector in gateway.connectors.items() for item in connector.left_out()]
        if args.json:
            print(json.dumps({**listing, "leftOut": left_out} if left_out else listing, indent=2,
                             ensure_ascii=False))
        else:
            for key, items in listing.items():
                print(f"{key} ({len(items)}):")
                for item in items:
                    label = item.get("uri") or item.get("uriTemplate") or item["name"]
                    extra = f"  [{item['name']}]" if label != item["name"] else ""
                    desc = (item.get("description") or "").splitlines()[0:1]
                    print(f"  {label}{extra}" + (f"  - {desc[0][:80]}" if desc else ""))
            if left_out:
                print(f"left out ({len(left_out)}):")
                for entry in left_out:
                    print(f"  {entry['connector']}: {entry['kind']} {entry['name']} by rule {entry['rule']}: "
                          f"{entry['reason']}")
        for name, detail in gateway.failed.items():
            print(f"connector {name} failed to start: {detail}", file=sys.stderr)
        # Started but not up (a database that refused the connection): its listing is incomplete.
        down = {name: c.health() for name, c in gateway.connectors.items() if not c.health().up}
        for name, health in down.items():
            print(f"connector {name} is down: {health.detail}", file=sys.stderr)
    finally:
        await gateway.stop(grace_s=0)
    return 2 if problems else 1 if gateway.failed or down else 0


async def _selection_problems(config: GatewayConfig) -> list[Any]:
    """``validate --deep``: every endpoint's selection over the live catalog (connectors started
    as ``list`` starts them): rules matching nothing, renames that collide or name nothing served."""
    if not config.endpoints:
        return []
    from gateway.app import Gateway
    from gateway.checks import Problem

    gateway = Gateway(config)
    await gateway.start(serving=False)
    try:
        out: list[Problem] = []
        for i, endpoint in enumerate(config.endpoints):
            host = gateway.endpoints.get(endpoint.name)
            for problem in host.view.selection.problems if host is not None else ():
                out.append(Problem(("endpoints", i, *problem.path), problem.message))
        return out
    finally:
        await gateway.stop(grace_s=0)


def _validate(args: argparse.Namespace) -> int:
    """Every problem in one run: schema errors, then what the checks find in every part the schema
    accepted (a type error in one connector hides no missing file in another), then warnings; with
    ``--deep``, every connector whose own entry passed is probed, whatever the others' problems.
    Exit 2 for any problem of the file, else 1 for a failed probe, else 0 (warnings do not fail)."""
    from gateway.checks import (
        Problem,
        config_warnings,
        connector_problems,
        deep_check,
        endpoint_problems,
        policy_problems,
    )
    from gateway.config import load_partial

    lines: dict[PathKey, int] = {}

    def report(problem: Problem, kind: str = "") -> None:
        path, line = locate(problem.path, lines)
        print(f"{args.file}: {kind}{path}{f' (line {line})' if line else ''}: {problem.message}", file=sys.stderr)

    try:
        partial = load_partial(args.file, lines=lines)
    except ConfigError as exc:  # the file as a whole is unreadable (YAML, unset variables: all of them)
        for error in getattr(exc, "errors", [exc]):
            print(f"{args.file}: {error}", file=sys.stderr)
        return 2
    config = partial.config
    for error in partial.errors:
        print(f"{args.file}: {error}", file=sys.stderr)
    by_connector = connector_problems(config, partial.indices)
    found: list[Problem] = []
    if partial.complete:
        found += policy_problems(config)
    found += by_connector
    # A rule naming a connector whose entry is invalid is not a problem of the rule.
    if partial.complete and not any(e.path.startswith("connectors[") for e in partial.errors):
        found += endpoint_problems(config)
    for problem in found:
        report(problem)
    for warning in config_warnings(config) if partial.complete else ():
        report(warning, "warning: ")
    failed = 0
    if args.deep:
        logging.basicConfig(stream=sys.stderr, level=logging.ERROR)
        bad = {problem.path[1] for problem in by_connector}
        probed = config.model_copy(update={"connectors": tuple(
            cfg for i, cfg in zip(partial.indices, config.connectors, strict=True) if i not in bad)})
        # Without a valid top level only the connectors can be probed (the rest is defaults).
        probes = _run_value(deep_check(probed, connectors_only=not partial.complete))
        for probe in probes:
            print(f"{probe.subject}: {'ok' if probe.ok else 'FAILED'}: {probe.detail}")
        failed = sum(1 for p in probes if not p.ok)
        if failed:
            print(f"{args.file}: {failed} of {len(probes)} checks failed", file=sys.stderr)
        elif not found and not partial.errors:
            selection = _run_value(_selection_problems(config))
            for problem in selection:
                report(problem)
            found += selection
    if found or partial.errors:
        return 2
    if failed:
        return 1
    print(f"{args.file}: OK")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-gateway", description="Serve many backends as one MCP server.")
    parser.add_argument("--version", action="version", version=f"mcp-gateway {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve over Streamable HTTP and legacy SSE")
    serve.add_argument("--config", required=True)
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", type=int, default=1, metavar="N",
                       help="N serving processes on one port (SO_REUSEPORT); N > 1 needs a shared state.store")
    serve.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)  # set for each worker
    # Set for each worker by the supervisor (gateway/workers.py): its private metrics socket, the
    # pipe it reports "serving" on, the supervisor's merged /metrics for the main port.
    serve.add_argument("--metrics-fd", type=int, help=argparse.SUPPRESS)
    serve.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    serve.add_argument("--metrics-aggregate", help=argparse.SUPPRESS)
    serve.add_argument("--reload-poll", type=float, metavar="SECONDS",
                       default=float(os.environ.get("MCP_GATEWAY_RELOAD_POLL_S", "2")),
                       help="check the config file for changes this often and hot-reload it (0: off)")
    stdio = sub.add_parser("stdio", help="serve one session over stdin/stdout")
    stdio.add_argument("--config", required=True)
    stdio.add_argument("--endpoint", metavar="NAME", help="serve one endpoint (endpoints:) instead of everything")
    validate = sub.add_parser("validate", help="validate a config file")
    validate.add_argument("file")
    validate.add_argument("--deep", action="store_true",
                          help="also load specs, connect to databases, upstreams and backends (one line each)")
    listing = sub.add_parser("list", help="print the catalog of a config")
    listing.add_argument("file")
    listing.add_argument("--json", action="store_true",
                         help="the listings as JSON, and leftOut: what a connector leaves out on purpose, by rule")
    listing.add_argument("--endpoint", metavar="NAME", help="what one endpoint (endpoints:) serves")
    sub.add_parser("audit", help="query the audit log (mcp-gateway audit query --help)", add_help=False)
    sub.add_parser("oauth", help="upstream OAuth grants: list, revoke (mcp-gateway oauth --help)", add_help=False)
    return parser


def _run(coro: Any) -> int:
    """Run the command on uvloop when it is installed (the default install has it: it cuts the
    gateway's per-request CPU noticeably); ``MCP_GATEWAY_LOOP=asyncio`` forces the stdlib loop."""
    return int(_run_value(coro))


def _run_value(coro: Any) -> Any:
    if os.environ.get("MCP_GATEWAY_LOOP", "auto") != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.run(coro)
    return asyncio.run(coro)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["audit"]:
        from gateway.audit import query_cli

        return query_cli.main(argv[1:])
    if argv[:1] == ["oauth"]:
        from gateway.oauth import cli as oauth_cli

        return oauth_cli.main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "validate":
        return _validate(args)
    if args.command == "serve" and args.workers != 1:
        from gateway.workers import serve_workers

        return serve_workers(args, argv)
    runner = {"serve": _serve, "stdio": _stdio, "list": _list}[args.command]
    with contextlib.suppress(KeyboardInterrupt):
        try:
            return _run(runner(args))
        except ConfigError as exc:  # found at start-up (a name collision): precise message, exit 2
            print(f"{getattr(args, 'config', None) or args.file}: {exc}", file=sys.stderr)
            return 2
    return 130


if __name__ == "__main__":
    raise SystemExit(main())
