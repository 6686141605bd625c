"""The Gradio API and its MCP tools under fuzzing: every endpoint called with inputs generated from its own schema.

Each endpoint's parameters come from the running server (``/gradio_api/info``; for MCP, each tool's ``inputSchema``),
and Hypothesis draws values for them from that schema: values the schema names (its defaults and choices), well-typed
values inside and outside the widgets' bounds (huge numbers, negatives, NaN and infinities), hostile strings (markup,
formulas, bidi and control characters, path tricks, huge texts), lists of numbers as text with holes in them, and
values of the wrong type; numbers at and just past the bounds a parameter's schema states ("between 1 and 20"). Beside
the draws, every text parameter of every endpoint gets a huge list once, the others at their defaults: 100,001
numbers and 20,000 lines. Every answer must be a result, or a refusal whose message is not the app's "unexpected"
one, and no answer (a result included) holds a traceback; the server must never answer 500. Draws are derandomised
(the same cases every run).
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import SUMMARY
from tests.helpers.servers import gradio_server

pytestmark = pytest.mark.slow  # a server of its own

#: Cases per endpoint over HTTP, and per MCP tool.
HTTP_CASES, MCP_CASES = 100, 25
HOSTILE = ["", " ", "<script>alert(1)</script>", '=HYPERLINK("http://evil.example")', "\u202eabc\x00\x1b[31m",
           "[MASK] " * 60, "東京 🤖👩‍👩‍👧", "../../../../etc/passwd", "/etc/passwd", "C:\\Windows\\system.ini",
           "a" * 5000, "word " * 3000, "null", "NaN", "-1", "1e308", "0,0,1", "random:", "random:-3", "trained/../x",
           "owner/name", "x" * 201, "%00", "{{7*7}}", "${jndi:ldap://x}"]
NUMBER_TEXT = st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**20, 10**20),
                                 st.sampled_from(["", "x", "1e999", "-0", " 3 "])), max_size=40) \
    .map(lambda xs: ",".join(str(x) for x in xs))
ODD_NUMBERS = st.one_of(st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63), 10**300, 0.5, -0.5, 1e-300]),
                        st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**12, 10**12))
#: Lists far past any bound an endpoint sets: as comma-separated numbers and as lines of text.
HUGE_LISTS = {"100,001 numbers": ",".join(["0.5"] * 100_001), "20,000 lines": "\n".join(["the cat sat on the mat"] * 20_000)}
WRONG_TYPES = st.one_of(st.none(), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                        st.booleans())


def value_strategy(schema: dict[str, Any], default: Any = None) -> st.SearchStrategy:
    """Values for one parameter of the JSON schema ``schema`` (Gradio's ``type`` or an MCP property)."""
    kind = schema.get("type")
    plausible = [v for v in [default, *(schema.get("enum") or [])] if v is not None]
    if kind == "string":
        typed = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=300), NUMBER_TEXT)
    elif kind in ("number", "integer"):
        bounds = re.search(r"between (-?[\d.]+) and (-?[\d.]+)", schema.get("description") or "")
        if bounds:  # a slider's range: at and just past each end
            lo, hi = float(bounds[1]), float(bounds[2])
            edges = [lo, hi, lo - 1, hi + 1, lo - 1e-9, hi + 0.5]
            typed = st.one_of(st.sampled_from([int(v) if v == int(v) else v for v in edges]), ODD_NUMBERS)
        else:
            typed = ODD_NUMBERS
    elif kind == "boolean":
        typed = st.booleans()
    else:
        typed = st.one_of(st.text(max_size=50), ODD_NUMBERS)
    options = [typed, WRONG_TYPES]
    if plausible:
        options.insert(0, st.sampled_from(plausible))
    return st.one_of(*options)


def arguments(params: list[tuple[dict[str, Any], Any]]) -> st.SearchStrategy:
    """A call's arguments: half the time every one drawn at will, half the time one drawn at will and the others at
    their defaults (so a bad value reaches the code behind the checks of the others)."""
    wild = [value_strategy(schema, default) for schema, default in params]
    tame = [st.just(default) if default is not None else w for (_, default), w in zip(params, wild, strict=True)]
    one_wild = st.integers(0, len(params) - 1).flatmap(
        lambda i: st.tuples(*[wild[j] if j == i else tame[j] for j in range(len(params))]))
    return st.one_of(st.tuples(*wild), one_wild)


def _post(url: str, body: dict) -> tuple[int, str]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def call(base: str, name: str, data: list) -> tuple[str, Any]:
    """One call through Gradio's HTTP API: ("complete", result) or ("error", message) or ("http <code>", body)."""
    code, text = _post(f"{base}gradio_api/call/{name}", {"data": data})
    if code != 200:
        return f"http {code}", text
    event = json.loads(text)["event_id"]
    with urllib.request.urlopen(f"{base}gradio_api/call/{name}/{event}", timeout=60) as resp:
        stream = resp.read().decode()
    kind, payload = None, None
    for line in stream.splitlines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ").strip()
        elif line.startswith("data: ") and kind in ("complete", "error"):
            payload = json.loads(line.removeprefix("data: "))
    return kind or "none", payload


def bad_answer(kind: str, payload: Any) -> str | None:
    """Why an answer is not a result or a clear refusal; None when it is one."""
    if "Traceback (most recent call last)" in json.dumps(payload, default=str):
        return f"a traceback in the answer: {str(payload)[:300]}"
    if kind == "complete":
        if not (isinstance(payload, list) and payload):
            return f"an empty result: {payload!r}"
        return "the unexpected-error message in a result" if "Something unexpected" in json.dumps(payload, default=str) else None
    if kind == "error":
        message = (payload or {}).get("error") if isinstance(payload, dict) else None
        if not message:
            return "a refusal without a message"
        if "Something unexpected" in message or "Traceback" in message:
            return f"an unexpected error: {message[:300]}"
        return None
    if kind.startswith("http 4"):
        return None if payload else "a 4xx without a body"
    return f"{kind}: {str(payload)[:300]}"


@pytest.fixture(scope="module")
def server(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    db = f"sqlite:///{tmp_path_factory.mktemp('fuzz-db') / 'results.db'}"
    # A small corpus index: the endpoints' answers to bad input are tested here, and the bundled MiniLM's index of the
    # default 6,000 sentences took most of nearest_contexts' cases (141 s of CI; tests/models/test_representations.py
    # builds and checks indexes).
    with gradio_server({"DATABASE_URL": db, "BFE_MODEL_DIR": str(tiny_dir), "BFE_GRADIO_MCP": "1",
                        "BFE_CORPUS_SENTENCES": "500"}) as url:
        yield url


@pytest.fixture(scope="module")
def endpoints(server: str) -> dict[str, list[dict]]:
    with urllib.request.urlopen(f"{server}gradio_api/info", timeout=30) as resp:
        info = json.loads(resp.read())
    return {name.lstrip("/"): spec["parameters"] for name, spec in info["named_endpoints"].items()}


def cases(strategy: st.SearchStrategy, n: int) -> list[Any]:
    """``n`` draws of ``strategy`` (Hypothesis's derandomised search: the same draws every run, the edges early)."""
    out: list[Any] = []

    @settings(max_examples=n, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value: Any) -> None:
        out.append(value)

    collect()
    return out


def test_the_server_lists_every_endpoint(endpoints: dict[str, list[dict]]) -> None:
    from app.gradio_app import API_NAMES

    assert set(endpoints) == API_NAMES


@pytest.mark.parametrize("name", sorted(__import__("app.gradio_app", fromlist=["API_NAMES"]).API_NAMES))
def test_an_endpoint_answers_fuzzed_input_with_a_result_or_a_message(server: str, endpoints: dict[str, list[dict]],
                                                                      name: str) -> None:
    params = endpoints[name]
    draws = cases(arguments([(p["type"], p.get("parameter_default")) for p in params]), HTTP_CASES)
    defaults = [p.get("parameter_default") for p in params]
    huge = [tuple(text if j == i else d for j, d in enumerate(defaults)) for i, p in enumerate(params)
            if p["type"].get("type") == "string" and not p["type"].get("enum") for text in HUGE_LISTS.values()]
    draws = draws + huge
    failures = []
    for values in draws:
        kind, payload = call(server, name, list(values))
        why = bad_answer(kind, payload)
        if why:
            failures.append(f"/{name}{json.dumps(list(values), default=str)[:300]}: {why}")
    SUMMARY.append(f"API fuzzing: /{name}, {len(draws)} cases over HTTP ({len(huge)} of them huge lists)")
    assert len(draws) >= HTTP_CASES // 2
    assert not failures, "\n".join(failures[:20])


def test_every_mcp_tool_answers_fuzzed_input_with_a_result_or_a_message(server: str) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    failures: list[str] = []
    counts: dict[str, int] = {}

    async def fuzz() -> None:
        async with streamablehttp_client(server.rstrip("/") + "/gradio_api/mcp/") as (read, write, _), \
                ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            for tool in tools:
                props = tool.inputSchema.get("properties", {})
                keys = list(props)
                draws = [dict(zip(keys, values, strict=True)) for values in
                         cases(arguments([(props[k], props[k].get("default")) for k in keys]), MCP_CASES)]
                for args in draws:
                    counts[tool.name] = counts.get(tool.name, 0) + 1
                    res = await session.call_tool(tool.name, json.loads(json.dumps(args, default=str)))
                    text = " ".join(getattr(c, "text", "") for c in res.content)
                    if "Traceback (most recent call last)" in text or (res.isError and (not text.strip() or "Something unexpected" in text)):
                        failures.append(f"{tool.name}{json.dumps(args, default=str)[:300]}: {text[:300]!r}")
                    elif not res.isError:
                        json.loads(text)  # a result is JSON text

    asyncio.run(fuzz())
    SUMMARY.append("API fuzzing (MCP): " + ", ".join(f"{n} {c}" for n, c in sorted(counts.items()))
                   + f"; {sum(counts.values())} cases")
    assert not failures, "\n".join(failures[:30])
    from app.gradio_app import API_NAMES

    assert set(counts) == API_NAMES  # every endpoint is a tool, and every tool was fuzzed
