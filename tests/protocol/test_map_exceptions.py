"""map_exceptions: third-party exceptions become gateway exceptions at a connector's edge."""

from __future__ import annotations

import asyncio
import traceback

import pytest

from gateway.protocol import jsonrpc
from gateway.protocol.errors import (
    BACKEND_UNAVAILABLE,
    BackendUnavailable,
    ConfigError,
    InvalidParams,
    ProtocolError,
    RequestTimeout,
    ToolExecutionError,
    map_exceptions,
)


class DriverError(Exception):
    """Stands in for a library's exception (aiohttp, asyncpg ...)."""


class DriverConnectionError(DriverError):
    pass


def test_a_protocol_error_class_is_built_from_the_exception_text() -> None:
    with pytest.raises(BackendUnavailable) as err, map_exceptions({DriverError: BackendUnavailable}):
        raise DriverError("connection refused")
    assert err.value.message == "connection refused"
    assert err.value.code == BACKEND_UNAVAILABLE
    assert jsonrpc.error_from_exception(1, err.value)["error"] == {"code": BACKEND_UNAVAILABLE,
                                                                    "message": "connection refused"}


def test_an_exception_without_text_gets_its_type_name() -> None:
    with pytest.raises(RequestTimeout) as err, map_exceptions({TimeoutError: RequestTimeout}):
        raise TimeoutError
    assert err.value.message == "TimeoutError"


def test_a_callable_builds_any_gateway_exception_from_the_original() -> None:
    def to_tool_error(exc: Exception) -> BaseException:
        return ToolExecutionError(f"GET /pets: the request failed ({type(exc).__name__})", status="unreachable")

    with pytest.raises(ToolExecutionError) as err, map_exceptions({DriverError: to_tool_error}):
        raise DriverConnectionError("reset by peer")
    assert err.value.message == "GET /pets: the request failed (DriverConnectionError)"
    assert err.value.status == "unreachable"
    assert err.value.to_result()["isError"] is True


def test_the_first_matching_key_wins_in_mapping_order() -> None:
    edge = map_exceptions({DriverConnectionError: BackendUnavailable, DriverError: InvalidParams})
    with pytest.raises(BackendUnavailable), edge:
        raise DriverConnectionError("down")
    with pytest.raises(InvalidParams), edge:
        raise DriverError("bad input")
    # A base listed first shadows its subclasses.
    with pytest.raises(InvalidParams), map_exceptions({DriverError: InvalidParams,
                                                        DriverConnectionError: BackendUnavailable}):
        raise DriverConnectionError("down")


def test_unmapped_exceptions_propagate_unchanged() -> None:
    original = KeyError("x")
    with pytest.raises(KeyError) as err, map_exceptions({DriverError: BackendUnavailable}):
        raise original
    assert err.value is original


@pytest.mark.parametrize("gateway_exc", [
    InvalidParams("bad argument"),
    BackendUnavailable("down"),
    ToolExecutionError("HTTP 404", status=404),
    ConfigError("broken", "connectors[0].spec"),
])
def test_gateway_exceptions_are_never_translated_twice(gateway_exc: Exception) -> None:
    # Even a mapping that claims every Exception leaves the gateway's own tree alone.
    with pytest.raises(type(gateway_exc)) as err, map_exceptions({Exception: RequestTimeout}):
        raise gateway_exc
    assert err.value is gateway_exc


async def test_cancellation_passes_through_untouched() -> None:
    edge = map_exceptions({Exception: BackendUnavailable})

    async def call() -> None:
        with edge:
            await asyncio.sleep(10)

    task = asyncio.create_task(call())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


def test_keyboard_interrupt_is_not_an_exception_to_map() -> None:
    with pytest.raises(KeyboardInterrupt), map_exceptions({Exception: BackendUnavailable}):
        raise KeyboardInterrupt


def test_the_replacement_hides_the_backend_traceback() -> None:
    secret = "postgresql://app:hunter2@db/prod"
    with pytest.raises(BackendUnavailable) as err, \
            map_exceptions({DriverError: lambda exc: BackendUnavailable("database unavailable")}):
        raise DriverError(f"cannot connect to {secret}")
    exc = err.value
    assert exc.__cause__ is None and exc.__suppress_context__ is True
    # The original is still there for a debugger, but a logged traceback does not show it.
    assert isinstance(exc.__context__, DriverError)
    printed = "".join(traceback.format_exception(exc))
    assert "hunter2" not in printed and "DriverError" not in printed
    assert "database unavailable" in printed


def test_a_callable_may_let_the_exception_pass_by_returning_it() -> None:
    original = DriverError("not ours to translate")
    with pytest.raises(DriverError) as err, map_exceptions({DriverError: lambda exc: exc}):
        raise original
    assert err.value is original and err.value.__suppress_context__ is False


def test_no_exception_no_effect_and_the_map_is_reusable() -> None:
    edge = map_exceptions({DriverError: BackendUnavailable})
    with edge:
        value = 1
    assert value == 1
    for message in ("first", "second"):
        with pytest.raises(BackendUnavailable) as err, edge:
            raise DriverError(message)
        assert err.value.message == message


async def test_concurrent_blocks_share_one_map() -> None:
    edge = map_exceptions({DriverError: BackendUnavailable})

    async def fail(message: str, delay: float) -> None:
        with edge:
            await asyncio.sleep(delay)
            raise DriverError(message)

    results = await asyncio.gather(fail("slow", 0.02), fail("fast", 0.0), return_exceptions=True)
    assert [type(r) for r in results] == [BackendUnavailable, BackendUnavailable]
    assert [r.message for r in results if isinstance(r, ProtocolError)] == ["slow", "fast"]


def test_translate_classifies_without_raising() -> None:
    edge = map_exceptions({DriverError: BackendUnavailable})
    mapped = edge.translate(DriverError("down"))
    assert isinstance(mapped, BackendUnavailable) and mapped.message == "down"
    other = ValueError("x")
    assert edge.translate(other) is other
    cancelled = asyncio.CancelledError()
    assert edge.translate(cancelled) is cancelled
    already = InvalidParams("x")
    assert edge.translate(already) is already
