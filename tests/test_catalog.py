"""The catalog: namespacing, collisions, keyset pagination whose cursors survive changes,
visibility, resource routing and capabilities."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from connectors.base import (
    Connector,
    ConnectorEvents,
    Health,
    PromptSpec,
    ResourceSpec,
    ResourceTemplateSpec,
    ToolSpec,
)
from connectors.config import ConnectorConfig
from connectors.instrumentation import NO_INSTRUMENTATION, Instrumentation
from gateway.catalog import Catalog, template_matches
from gateway.context import CallContext
from gateway.protocol.cursors import CursorCodec
from gateway.protocol.errors import BackendUnavailable, ConfigError, InvalidParams, ResourceNotFound


class Fake(Connector):
    kind = "fake"

    def __init__(self, name: str, tools: Sequence[str] = (), prompts: Sequence[str] = (),
                 resources: Sequence[str] = (), templates: Sequence[str] = (), owns: str | None = None) -> None:
        super().__init__(ConnectorConfig(name=name, type="fake"))
        self.tool_names = list(tools)
        self.prompt_names = list(prompts)
        self.uris = list(resources)
        self.templates = list(templates)
        self.owns = owns
        self.up = True

    async def start(self, events: ConnectorEvents, instrumentation: Instrumentation = NO_INSTRUMENTATION) -> None:
        self.attach(events, instrumentation)

    def health(self) -> Health:
        return Health(self.up)

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec(n, {"name": n, "inputSchema": {"type": "object"}, "_meta": {"from": self.name}})
                for n in self.tool_names]

    def prompts(self) -> list[PromptSpec]:
        return [PromptSpec(n, {"name": n}) for n in self.prompt_names]

    def resources(self) -> list[ResourceSpec]:
        return [ResourceSpec(u, u.rsplit("/", 1)[-1], {"uri": u, "name": u.rsplit("/", 1)[-1]}) for u in self.uris]

    def resource_templates(self) -> list[ResourceTemplateSpec]:
        return [ResourceTemplateSpec(t, "tpl", {"uriTemplate": t, "name": "tpl"}) for t in self.templates]

    def owns_uri(self, uri: str) -> bool:
        return self.owns is not None and uri.startswith(self.owns)


def _catalog(*connectors: tuple[Fake, str], page_size: int = 3) -> Catalog:
    catalog = Catalog(page_size, CursorCodec("test"))
    catalog.set_connectors(list(connectors))
    catalog.rebuild(strict=True)
    return catalog


def _walk(catalog: Catalog, method: str, ctx: CallContext | None = None) -> tuple[list[str], int]:
    key = {"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources",
           "resources/templates/list": "resourceTemplates"}[method]
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = catalog.list_page(method, cursor, ctx)
        pages += 1
        assert len(page[key]) <= catalog.page_size
        seen += [item.get("uri") or item.get("uriTemplate") or item["name"] for item in page[key]]
        cursor = page.get("nextCursor")
        if cursor is None:
            return seen, pages


def test_names_are_prefixed_sorted_and_paginated() -> None:
    a = Fake("alpha", tools=[f"t{i}" for i in range(7)], prompts=["p"])
    b = Fake("beta", tools=["zz", "aa"], prompts=["p"])
    catalog = _catalog((a, "alpha_"), (b, ""))
    names, pages = _walk(catalog, "tools/list")
    assert names == sorted(names) == ["aa"] + [f"alpha_t{i}" for i in range(7)] + ["zz"]
    assert pages == 3
    assert _walk(catalog, "prompts/list")[0] == ["alpha_p", "p"]
    entry = catalog.tool("alpha_t3")
    assert entry.connector is a and entry.local == "t3" and entry.wire["name"] == "alpha_t3"
    assert entry.wire["_meta"] == {"from": "alpha"}  # unknown fields pass through
    assert a.tools()[3].definition["name"] == "t3"  # the connector's own definition is untouched
    with pytest.raises(InvalidParams):
        catalog.tool("t3")
    with pytest.raises(InvalidParams):
        catalog.prompt("nope")


def test_exact_page_boundary_has_no_dangling_cursor() -> None:
    catalog = _catalog((Fake("c", tools=["a", "b", "c", "d", "e", "f"]), ""))
    first = catalog.list_page("tools/list", None)
    second = catalog.list_page("tools/list", first["nextCursor"])
    assert [t["name"] for t in second["tools"]] == ["d", "e", "f"] and "nextCursor" not in second
    empty = _catalog((Fake("d"), ""))
    assert empty.list_page("tools/list", None) == {"tools": []}


def test_cursor_stays_valid_when_the_list_changes() -> None:
    conn = Fake("c", tools=["b", "d", "f", "h", "j", "l"])
    catalog = _catalog((conn, ""))
    first = catalog.list_page("tools/list", None)
    assert [t["name"] for t in first["tools"]] == ["b", "d", "f"]
    # Between pages: the cursor's own key is removed, items appear before and after it.
    conn.tool_names = ["a", "b", "d", "e", "g", "h", "j", "k", "l"]
    assert catalog.rebuild() == {"tools"}
    second = catalog.list_page("tools/list", first["nextCursor"])
    assert [t["name"] for t in second["tools"]] == ["g", "h", "j"]  # after "f", wherever it went
    third = catalog.list_page("tools/list", second["nextCursor"])
    assert [t["name"] for t in third["tools"]] == ["k", "l"] and "nextCursor" not in third
    # Everything shrinks below the cursor: an empty last page, not an error.
    conn.tool_names = ["a"]
    catalog.rebuild()
    assert catalog.list_page("tools/list", second["nextCursor"]) == {"tools": []}


def test_bad_cursors_are_invalid_params() -> None:
    catalog = _catalog((Fake("c", tools=list("abcdefg"), prompts=list("abcdefg")), ""))
    cursor = catalog.list_page("tools/list", None)["nextCursor"]
    for bad in (cursor[:-1], cursor + "x", "A" + cursor[1:], "", 12):
        with pytest.raises(InvalidParams):
            catalog.list_page("tools/list", bad)
    with pytest.raises(InvalidParams):
        catalog.list_page("prompts/list", cursor)
    other = Catalog(3, CursorCodec("another-secret"))
    other.set_connectors([(Fake("c", tools=list("abcdefg")), "")])
    other.rebuild()
    with pytest.raises(InvalidParams):
        other.list_page("tools/list", cursor)


def test_visibility_hides_items_and_pages_stay_full() -> None:
    catalog = _catalog((Fake("c", tools=[f"t{i}" for i in range(10)]), ""))
    ctx = CallContext(session=None, method="tools/list", request_id=1, params={},  # type: ignore[arg-type]
                      visible=lambda kind, name: kind == "tool" and int(name[1:]) % 2 == 1)
    first = catalog.list_page("tools/list", None, ctx)
    assert [t["name"] for t in first["tools"]] == ["t1", "t3", "t5"]
    names, _ = _walk(catalog, "tools/list", ctx)
    assert names == ["t1", "t3", "t5", "t7", "t9"]
    nothing = replace(ctx, visible=lambda kind, name: False)
    assert catalog.list_page("tools/list", None, nothing) == {"tools": []}


def test_collisions_at_start_up_name_both_sources() -> None:
    one = Fake("one", tools=["search"])
    two = Fake("two", tools=["search"])
    catalog = Catalog(10, CursorCodec("x"))
    catalog.set_connectors([(one, ""), (two, "")])
    with pytest.raises(ConfigError) as info:
        catalog.rebuild(strict=True)
    message = str(info.value)
    assert "'search'" in message and "'one'" in message and "'two'" in message
    assert catalog.collisions == ()
    # Not strict (gateway.names.on_collision: keep_first, the default, and every rebuild after
    # start-up): the first connector keeps the name and the collision is kept to be reported.
    assert catalog.rebuild(strict=False) == {"tools"}
    assert catalog.tool("search").connector is one
    [clash] = catalog.collisions
    assert "'search'" in clash and "connector 'two'" in clash and "serving the one from 'one'" in clash
    assert catalog.rebuild(strict=False) == set() and catalog.collisions == (clash,)
    # Names that only collide after sanitising collide too.
    catalog.set_connectors([(Fake("a", prompts=["x y"]), ""), (Fake("b", prompts=["x_y"]), "")])
    with pytest.raises(ConfigError, match="prompt name collision"):
        catalog.rebuild(strict=True)


def test_long_names_are_shortened_in_listings() -> None:
    local = "get_" + "very_long_operation_name_" * 4
    catalog = _catalog((Fake("connector", tools=[local, local + "2"]), "connector_"))
    names, _ = _walk(catalog, "tools/list")
    assert len(set(names)) == 2 and all(len(n) <= 64 for n in names)
    assert catalog.tool(names[0]).local in (local, local + "2")


def test_resources_templates_and_routing() -> None:
    a = Fake("a", resources=["docs://x", "shared://same"], templates=["db://{table}/rows"])
    b = Fake("b", resources=["shared://same"], owns="dyn://")
    catalog = _catalog((a, "a_"), (b, "b_"))
    uris, _ = _walk(catalog, "resources/list")
    assert uris == ["a+shared://same", "b+shared://same", "docs://x"]
    assert catalog.resource_owner("docs://x") == (a, "docs://x", "a_x")
    assert catalog.resource_owner("b+shared://same")[:2] == (b, "shared://same")
    assert catalog.public_uri("a", "shared://same") == "a+shared://same"
    assert catalog.public_uri("a", "docs://x") == "docs://x"
    assert catalog.resource_owner("db://users/rows") == (a, "db://users/rows", "a_tpl")
    assert catalog.resource_owner("dyn://anything")[:2] == (b, "dyn://anything")
    assert _walk(catalog, "resources/templates/list")[0] == ["db://{table}/rows"]
    for missing in ("docs://y", "db://users/cols", "zzz"):
        with pytest.raises(ResourceNotFound) as info:
            catalog.resource_owner(missing)
        assert info.value.code == -32002
    assert catalog.access_name("resource", "docs://x") == "a_x"
    assert catalog.access_name("tool", "anything") == "anything"


def test_template_matching() -> None:
    assert template_matches("db://{table}/rows", "db://users/rows")
    assert not template_matches("db://{table}/rows", "db://a/b/rows")
    assert template_matches("file:///{+path}", "file:///a/b/c.txt")
    assert template_matches("x://{a}.{b}", "x://1.2")
    assert not template_matches("x://{a}", "x://")


def test_down_connectors_contribute_nothing_and_capabilities() -> None:
    tools = Fake("tools", tools=["t"])
    docs = Fake("docs", resources=["d://1"], prompts=["p"])
    catalog = _catalog((tools, ""), (docs, ""))
    caps = catalog.capabilities()
    assert caps["tools"] == {"listChanged": True} and caps["prompts"] == {"listChanged": True}
    assert caps["resources"] == {"subscribe": True, "listChanged": True}
    assert "logging" in caps and "completions" in caps
    tools.up = False
    assert catalog.rebuild() == {"tools"}
    assert catalog.counts() == {"tools": 0, "prompts": 1, "resources": 1, "resourceTemplates": 0}
    assert catalog.rebuild() == set()  # nothing changed: nothing to announce
    only_tools = _catalog((Fake("t", tools=["x"]), ""))
    assert set(only_tools.capabilities()) == {"logging", "tools"}


def test_calls_to_a_down_connector_fail_fast_naming_it() -> None:
    """While a connector is down its tools are hidden, but calling one says the connector is down
    (BackendUnavailable) rather than "unknown tool"; after recovery the tool resolves again."""
    flaky = Fake("flaky", tools=["t"], prompts=["p"])
    catalog = _catalog((flaky, "f_"), (Fake("other", tools=["x"]), "o_"))
    flaky.up = False
    catalog.rebuild()
    catalog.rebuild()  # a second rebuild while down still remembers what it served
    for resolve, name in ((catalog.tool, "f_t"), (catalog.prompt, "f_p")):
        with pytest.raises(BackendUnavailable) as info:
            resolve(name)
        assert "flaky" in info.value.message and info.value.data == {"connector": "flaky"}
    with pytest.raises(InvalidParams):
        catalog.tool("f_never_existed")
    assert catalog.tool("o_x").connector.name == "other"
    flaky.up = True
    catalog.rebuild()
    assert catalog.tool("f_t").local == "t"
