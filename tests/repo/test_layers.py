"""The house's contract: imports point one way (docs/layout.md; ../shared/DESIGN.md, "Layers").

    bench, scripts → app → services → models → analysis → core

Every import counts, function-local ones included (a local import is still a dependency; only imports under
``if TYPE_CHECKING:`` are left out, since they never run). On top of the layer order: no circle between two
files, ``core`` imports nothing of ours, ``analysis`` imports neither torch nor transformers, nothing below ``app``
imports streamlit or gradio, and a page's module (``app/views/``) acts only through the library (no queue
dispatch, folder deletion or file writes of its own).

``app`` reaches the library through ``services`` only: each feature's use case there is the one place its requests
are validated and its work decided, for the pages and the Gradio app alike. Besides ``services`` and ``core``, app/
may import the drawing modules of ``analysis`` (:data:`DRAWING`: data in, a figure, HTML or CSV bytes out, nothing
decided), since a figure is the front end's business, and an ``analysis`` module's types, constants and errors
(``from analysis.tasks import BUILT_IN``: they decide nothing and import no torch). A service exports what it decides
and nothing it merely passes through (:func:`test_services_export_what_they_decide`). And a page computes nothing itself: no numerical library
(:data:`PAGE_FORBIDDEN`; pandas is allowed, for the tables it shows) and no function longer than
:data:`PAGE_FUNCTION_LINES` lines (a longer one is logic that belongs in a use case). A fragment (``@st.fragment``:
the section of a page that reruns alone when its own widgets change) is the page's drawing code moved into a function
so that it can rerun by itself; it may be :data:`PAGE_FRAGMENT_LINES` long. Nor does a page keep its views at module
level: no statement there (an ``if`` over the views, a ``with`` around a form) is longer than
:data:`PAGE_STATEMENT_LINES` lines; a view is a function, chosen from a dispatch table.

Written over ``ast`` rather than with import-linter: the layers contract is a few lines either way, and the same
walk checks the package rules (torch, streamlit) and the pages, which import-linter does not.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from tests.helpers import ROOT

#: top to bottom: a package may import those below it, never those above
LAYERS = ("app", "services", "models", "analysis", "core")
PAGE_ACTIONS = ("rmtree(", ".dispatch(", "write_bytes(", "write_text(", "unlink(")
#: The analysis modules app/ may import: they only draw (plotly figures, HTML, safe CSV bytes).
DRAWING = ("analysis.family_tree", "analysis.safe_text", "analysis.calculator")
#: Libraries a page must not import: computing is a use case's job.
PAGE_FORBIDDEN = ("numpy", "scipy", "sklearn", "torch", "transformers", "captum")
#: The longest function a page may define (a helper that draws one thing fits; a computation does not).
PAGE_FUNCTION_LINES = 40
#: The longest fragment: a section of the page's drawing, controls and views, that reruns on its own.
PAGE_FRAGMENT_LINES = 100
#: A page's statement at module level (an ``if`` over its views, a ``with`` around a form) is at most this long: a longer
#: one is a view that belongs in a function of its own, drawn from a dispatch table.
PAGE_STATEMENT_LINES = 30
#: Widgets a page bounds by its use case's bounds (a service's BOUNDS or MAX_* constant), never by numbers of its own:
#: where a page writes a bound itself it drifts from what the service accepts (a box that offers 600 where the service
#: takes 256). A literal lower bound is allowed beside a bound read from the model (a slider over 0 .. its layers).
NUMBER_WIDGETS = ("number_input", "slider")
TEXT_WIDGETS = ("text_input", "text_area")


def _literal(node: ast.AST | None) -> bool:
    """A number written out in the page (``1_000``, ``10**6``, ``-1``), not a named bound."""
    return node is not None and not any(isinstance(n, ast.Name | ast.Attribute | ast.Subscript | ast.Call) for n in ast.walk(node))


def _own_bounds(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each widget of a page bounded by numbers the page writes itself, or not bounded above."""
    out = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            continue
        kind, kw = call.func.attr, {k.arg: k.value for k in call.keywords}
        if kind in NUMBER_WIDGETS:
            high = call.args[2] if len(call.args) > 2 else kw.get("max_value")
            if high is None or _literal(high):
                out.append((call.lineno, f"{kind} bounded by numbers written in the page (or not at all)"))
        elif kind in TEXT_WIDGETS and _literal(kw.get("max_chars")):
            out.append((call.lineno, f"{kind} with max_chars written in the page"))
        elif kind == "download_button":  # its click would rerun the page, which can drop the file it asked for
            out.append((call.lineno, "download_button not through ui.download"))
    return out


def _fragment(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any("fragment" in ast.unparse(d) for d in fn.decorator_list)


def _too_long(fn: ast.AST) -> bool:
    if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    return fn.end_lineno - fn.lineno + 1 > (PAGE_FRAGMENT_LINES if _fragment(fn) else PAGE_FUNCTION_LINES)


def _drawing(name: str) -> bool:
    module = name if not name.rpartition(".")[2][:1].isupper() else name.rpartition(".")[0]
    return any(module == d or module.startswith(d + ".") for d in DRAWING) or module.split(".")[1].endswith("_plots")


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for top in LAYERS:
        for path in (root / top).rglob("*.py"):
            if "vendor" in path.parts or "__pycache__" in path.parts:
                continue
            out[".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")] = path
    return out


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, imported module or module.name) for every import outside ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for stmt in node.body for n in ast.walk(stmt)}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            out += [(node.lineno, base)] + [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one file (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def _handed_to_app(path: Path) -> set[tuple[int, str]]:
    """(line, name) of the imports by which a page takes a type, a constant or an error from an ``analysis`` module
    (``from analysis.tasks import BUILT_IN``): allowed, since they decide nothing and import no torch. The module's
    own entry counts as allowed with them."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("analysis.") and node.names \
                and all(_type_or_constant(a.name) for a in node.names):
            out |= {(node.lineno, node.module)} | {(node.lineno, f"{node.module}.{a.name}") for a in node.names}
    return out


def problems(root: Path) -> tuple[list[str], dict[tuple[str, str], int]]:
    """(every breach of the contract in the tree at ``root``, package arrows with their import counts)."""
    files = _modules(root)
    found, edges, arrows = [], defaultdict(set), defaultdict(int)
    for mod, path in files.items():
        top = mod.split(".")[0]
        handed = _handed_to_app(path) if top == "app" else set()
        for line, name in _imports(path, mod):
            first = name.split(".")[0]
            where = f"{path.relative_to(root)}:{line}"
            if top == "analysis" and first in ("torch", "transformers", "streamlit", "gradio"):
                found.append(f"{where} analysis imports {first}")
            if top != "app" and first in ("streamlit", "gradio"):
                found.append(f"{where} {top} imports {first}")
            if top == "app" and (first == "models" or (first == "analysis" and "." in name and not _drawing(name)
                                                       and (line, name) not in handed)):
                found.append(f"{where} app imports {name} (app reaches the library through services)")
            if path.parent.name == "views" and top == "app" and first in PAGE_FORBIDDEN:
                found.append(f"{where} a page imports {first} (computing belongs in a use case)")
            if first in LAYERS and first != top:
                arrows[top, first] += 1
                if LAYERS.index(first) < LAYERS.index(top):
                    found.append(f"{where} {top} imports {name} (upward: {top} is below {first})")
            target = name
            while target and target not in files:
                target = target.rpartition(".")[0]
            if target and target != mod:
                edges[mod].add(target)
    found += ["file circle: " + " <-> ".join(c) for c in _cycles(edges)]
    for path in sorted((root / "app" / "views").glob("*.py")):
        src = path.read_text(encoding="utf-8")
        found += [f"{path.relative_to(root)}: a page does {act!r} itself" for act in PAGE_ACTIONS if act in src]
        found += [f"{path.relative_to(root)}:{fn.lineno} {fn.name} is {fn.end_lineno - fn.lineno + 1} lines (a page's functions "
                  f"draw: at most {PAGE_FUNCTION_LINES}, a fragment {PAGE_FRAGMENT_LINES})"
                  for fn in ast.walk(ast.parse(src)) if _too_long(fn)]
        found += [f"{path.relative_to(root)}:{node.lineno} a statement of {node.end_lineno - node.lineno + 1} lines at module level "
                  f"(at most {PAGE_STATEMENT_LINES}: a view is a function)"
                  for node in ast.parse(src).body if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                  and node.end_lineno - node.lineno + 1 > PAGE_STATEMENT_LINES]
        found += [f"{path.relative_to(root)}:{line} {what}: take the use case's bounds" for line, what in _own_bounds(ast.parse(src))]
    return found, dict(arrows)


def test_imports_point_one_way_with_no_circles() -> None:
    found, arrows = problems(ROOT)
    assert found == []
    assert all(LAYERS.index(a) < LAYERS.index(b) for a, b in arrows)  # every package arrow points down


@pytest.mark.parametrize(("where", "line", "why"), [
    ("core/registry.py", "from models import loader", "upward"),
    ("analysis/params.py", "from services import lab", "upward"),
    ("models/loader.py", "import app.ui", "upward"),
    ("analysis/memory.py", "import torch", "analysis imports torch"),
    ("models/device.py", "import streamlit as st", "models imports streamlit"),
    ("app/views/home.py", "import shutil\nshutil.rmtree('x')", "a page does 'rmtree('"),
    ("app/views/attention.py", "from models.attention import extract_attention", "through services"),
    ("app/ui/pickers.py", "def f():\n    from analysis import memory", "through services"),
    ("app/gradio_api/endpoints.py", "from analysis.params import HEADS, parameter_breakdown", "through services"),
    ("app/views/results.py", "from analysis.glue import compare", "through services"),
    ("app/views/scaling.py", "import numpy as np", "a page imports numpy"),
    ("app/views/home.py", "def f():\n" + "    x = 1\n" * 45, "is 46 lines"),
    ("app/views/home.py", "@st.fragment\ndef f():\n" + "    x = 1\n" * 105, "is 106 lines"),
    ("app/views/home.py", "if True:\n" + "    x = 1\n" * 31, "a statement of 32 lines"),
    ("app/views/home.py", "st.number_input('Top k', 1, 20, key='x')", "number_input bounded by numbers written in the page"),
    ("app/views/home.py", "st.download_button('CSV', b'x', 'x.csv', 'text/csv')", "download_button not through ui.download"),
    ("app/views/home.py", "st.slider('k', 0, 10**6, key='x')", "slider bounded by numbers written in the page"),
    ("app/views/home.py", "st.number_input('x', min_value=0.0, key='x')", "(or not at all)"),
    ("app/views/home.py", "st.text_input('Text', key='x', max_chars=500)", "text_input with max_chars written in the page"),
    ("models/checkpoint.py", "def f():\n    from models import loader", "file circle"),
])
def test_the_contract_fails_on_an_import_that_breaks_it(tmp_path: Path, where: str, line: str, why: str) -> None:
    import shutil

    for top in LAYERS:
        shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("vendor", "__pycache__", "assets"))
    path = tmp_path / where
    path.write_text(path.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")
    found, _ = problems(tmp_path)
    assert any(why in p for p in found), found


#: Where tests live: a folder per package they test (as the package is laid out), the deployments, the repository's
#: own contracts, the benches' counting, and the one helpers package.
TEST_FOLDERS = (*LAYERS, "deploy", "repo", "bench", "helpers")


def test_tests_sit_by_what_they_test_and_share_only_helpers() -> None:
    """A test module imports what it shares from ``tests.helpers`` (or pytest's conftest fixtures), never from another
    test module; and each test module sits in a folder named for the package it tests, mirroring its sub-packages."""
    tests = ROOT / "tests"
    misplaced, borrowed = [], []
    for path in tests.rglob("*.py"):
        rel = path.relative_to(tests)
        if "__pycache__" in rel.parts or rel.parts == ("conftest.py",) or rel.parts == ("__init__.py",):
            continue
        top = rel.parts[0]
        if top not in TEST_FOLDERS or len(rel.parts) == 1:
            misplaced.append(str(rel))
        elif top in LAYERS and len(rel.parts) > 2 and not (ROOT / Path(*rel.parts[:-1])).is_dir():
            misplaced.append(str(rel))  # tests/models/pretrain/ only where models/pretrain/ exists
        for _, name in _imports(path, ".".join(("tests", *rel.with_suffix("").parts))):
            if name.startswith("tests.") and not (name == "tests.helpers" or name.startswith("tests.helpers.")):
                borrowed.append(f"{rel}: {name}")
    # Every folder a package: without its __init__.py, tests/app/ would be put on sys.path as `app` and hide the app.
    loose = [str(d.relative_to(tests)) for d in [tests, *tests.rglob("*")] if d.is_dir() and d.name != "__pycache__"
             and not (d / "__init__.py").exists()]
    assert misplaced == [] and borrowed == [] and loose == []


def _private_exports(root: Path) -> list[str]:
    """``module: name`` for every private name (a leading underscore, not a dunder) listed in an ``__all__``."""
    out = []
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                    for elt in getattr(node.value, "elts", []):
                        name = getattr(elt, "value", None)
                        if isinstance(name, str) and name.startswith("_") and not name.startswith("__"):
                            out.append(f"{path.relative_to(root)}: {name}")
    return out


def _type_or_constant(name: str) -> bool:
    """A class (CapWords) or a constant (UPPER_CASE): what a lower layer's module may hand a page as it is."""
    return name[:1].isupper()


def _borrowed_exports(root: Path) -> list[str]:
    """``module: name`` for every name a service exports (``__all__``) that it did not decide: a lower layer's function
    or module passed through, or a lower layer's type or constant exported under another name."""
    out = []
    for path in sorted((root / "services").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lower = {a.asname or a.name: a.name for node in tree.body if isinstance(node, ast.ImportFrom) and node.module
                 and node.module.split(".")[0] in LAYERS[2:] for a in node.names}
        exported = [getattr(e, "value", "") for node in tree.body if isinstance(node, ast.Assign)
                    and any(getattr(t, "id", "") == "__all__" for t in node.targets) for e in getattr(node.value, "elts", [])]
        for name in exported:
            if name in lower and (lower[name] != name or not _type_or_constant(name)):
                why = f"renamed from {lower[name]}" if lower[name] != name else "a lower layer's function or module"
                out.append(f"{path.relative_to(root)}: {name} ({why})")
    return out


def test_services_export_what_they_decide(tmp_path: Path) -> None:
    """A service's ``__all__`` lists what it decides (its requests, results, limits and errors, and the functions it
    defines). A lower layer's type or constant may be handed on under its own name; a lower layer's function is not
    passed through (the page imports a drawing function from its analysis module, and a service owns the rest)."""
    assert _borrowed_exports(ROOT) == []
    planted = tmp_path / "services" / "x.py"
    planted.parent.mkdir(parents=True)
    planted.write_text("from analysis.glue import compare\nfrom analysis.tasks import BUILT_IN as TASKS\n"
                       "from analysis.memory import GPUS\n__all__ = ['GPUS', 'TASKS', 'compare']\n")
    assert _borrowed_exports(tmp_path) == ["services/x.py: TASKS (renamed from BUILT_IN)",
                                           "services/x.py: compare (a lower layer's function or module)"]


def test_no_private_name_is_exported(tmp_path: Path) -> None:
    """A package exports what it decides; a private helper is imported from the module that defines it, by a test."""
    assert _private_exports(ROOT) == []
    planted = tmp_path / "services" / "x.py"
    planted.parent.mkdir(parents=True)
    planted.write_text('__all__ = ["ok", "_helper"]\n')
    for layer in LAYERS:
        (tmp_path / layer).mkdir(exist_ok=True)
    assert _private_exports(tmp_path) == ["services/x.py: _helper"]


def test_one_module_chooses_where_a_model_call_runs() -> None:
    """The route of a model call (in this process, the model process, a model backend) is chosen in
    services/executor.py only: no other module reads the settings that choose it to decide where to run something."""
    import re

    choosing = re.compile(r"(settings|get_settings\(\))\.(backend|model_process)\b\s*(else|and|or|:|\)|$)|"
                          r"\bif\s+(not\s+)?(settings|get_settings\(\))\.(backend|model_process)\b")
    found = [f"{path.relative_to(ROOT)}:{n}" for top in ("app", "services", "models", "analysis")
             for path in sorted((ROOT / top).rglob("*.py")) if path != ROOT / "services" / "executor.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if choosing.search(line)]
    assert not found, f"these choose where a model call runs outside services/executor.py: {found}"
    for module in ("services/runtime.py", "services/backend/client.py"):
        assert "def enabled(" not in (ROOT / module).read_text(encoding="utf-8"), module
