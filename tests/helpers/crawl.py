"""A crawler over the app's reachable states: every page opened the way a browser opens it, its widgets discovered from
what the page draws, and each widget moved as a user can move it. ``tests/app/test_states.py`` drives it; ``bench/crawl.py``
runs the whole crawl and prints the states it tried per page.

Streamlit's ``AppTest`` runs the entry script (``app/streamlit_app.py``: navigation, presentation mode, the error
wrapper, the sidebar) and then switches to a page, as a browser that opens the app and clicks a page does. A state is
a short list of moves from a page's defaults; it *draws* when neither run of it (the move, then a rerun with the state
kept) raises, shows Streamlit's exception box, or shows the app's "Something unexpected went wrong" message, and when
every deferred download the page offers builds its file.

Moves are derived from the widgets themselves, so a widget added to a page is crawled the day it is added:

- selectbox, radio, segmented control, pills: every option (and none, where the widget allows it);
- multiselect: none, each option alone, all of them;
- toggle, checkbox: flipped; number input, slider: its minimum and maximum (a bound the widget lacks: ±10¹²);
- text input, text area: empty, at and past its length bound, and hostile text (markup, formulas, bidi and control
  characters, ``[MASK]`` repeated, CJK and emoji);
- button: pressed; file uploader: empty, binary, hostile CSV and text files;
- URL state: every key a page writes to its address or declares among its URL defaults, with a value the page wrote
  (else its default), a malformed one, and out-of-range ones (a number below zero and past any bound, an option the
  page does not offer).

Every state starts from the page's world as it was — its results database and model folder (:class:`Worlds`): a
state after one that wrote (detected from the files, not guessed from the move) gets a fresh copy, so no state sees
what another wrote and the crawl's order does not change what it finds. Single moves take at most ``single_cap`` options of a widget
(40 by default, spread from the first to the last); pairs at most ``pair_cap`` of each (3).

Not crawled: ``st.data_editor`` (AppTest cannot set it; the library functions behind the scaling page's editor are
covered by property tests), and widgets that appear only after a text is typed or a button pressed.

Options are compared as the browser shows them (formatted), so a move is replayed on a fresh page by its label: the
value behind a label is the page's business, as it is in a browser.
"""

from __future__ import annotations

import ast
import copy
import itertools
import logging
import os
import shutil
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest, local_script_runner
from streamlit.testing.v1 import element_tree as et
from streamlit.util import calc_hash

from tests.helpers import ROOT

ENTRY = ROOT / "app" / "streamlit_app.py"
UNEXPECTED = "Something unexpected went wrong"
#: What a widget with no bound of its own is pushed to (a number a user can type).
NO_BOUND = 10**12
#: Text for every text box: each kind of input that has broken a web page somewhere.
HOSTILE_TEXT = {
    "markup": "<script>alert(1)</script><img src=x onerror=alert(2)> **bold** [link](javascript:alert(3)) $x^2$",
    "formula": '=HYPERLINK("http://evil.example","click") +cmd|\'/c calc\'!A1 @SUM(1) -2+3',
    "bidi-control": "abc\u202edcba\u2066x\u2069 \u200b\u200d\x00\x07\x1b[31m\r\n\tend",
    "masks": " ".join(["[MASK]"] * 40),
    "cjk-emoji": "東京は日本の首都です。 나는 학생이다 🤖🎉👩‍👩‍👧‍👦🏳️‍🌈",
    "path": "../../../../etc/passwd",
    "whitespace": "   \t  ",
}
#: Where a text box has no length bound of its own, this long a text stands for "huge".
HUGE_TEXT = 20_000
#: Files for every uploader: (name suffix, bytes).
HOSTILE_FILES = {
    "empty": b"",
    "binary": bytes(range(256)) * 64,
    "formula-csv": b'model,task,value\n=HYPERLINK("http://evil.example"),<b>x</b>,1e999\n"a,b",\xff\xfe,-inf\n',
    "numbers-csv": b"N,D,loss\n1e6,2e9,3.1\n1e7,2e10,2.7\n1e8,2e11,2.4\n1e9,2e12,2.2\n0,-1,nan\n",
    "text": "the cat sat on the mat .\n東京 🤖\n".encode() * 50,
}
CHOICE_KINDS = ("selectbox", "radio", "button_group", "select_slider")


@dataclass(frozen=True)
class Ref:
    """A widget as a user finds it again on a fresh page: its key, else its kind, label and place among its kin."""

    kind: str
    key: str | None
    label: str
    nth: int = 0

    def __str__(self) -> str:
        return self.key or f"{self.kind} '{self.label[:40]}'" + (f" #{self.nth}" if self.nth else "")


@dataclass(frozen=True)
class Move:
    """One thing a user does to one widget: pick an option (by its label; None clears it), set a value, click, upload."""

    ref: Ref
    how: str  # "option" | "options" | "value" | "click" | "upload"
    value: Any = None
    label: str = ""

    def __str__(self) -> str:
        return f"{self.ref} := {self.label or self.value!r}"[:160]


@dataclass
class Crawl:
    """What a crawl of one page tried, and what broke."""

    page: str
    states: int = 0
    skipped: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: Fresh worlds made (the first state's, and one after each state that wrote).
    worlds: int = 0
    #: Of the states above, those the sampled crawl takes (``mark_sample``), and their failures.
    sample_states: int = 0
    sample_failures: list[str] = field(default_factory=list)

    def sample(self) -> Crawl:
        """The part of this crawl that the sampled crawl would have tried (:func:`crawl_page`'s ``mark_sample``)."""
        return Crawl(self.page, self.sample_states, 0, list(self.sample_failures), 0.0, self.worlds)

    def line(self) -> str:
        return (f"{self.page}: {self.states} states ({self.skipped} unreachable moves skipped), "
                f"{len(self.failures)} failing, {self.worlds} fresh worlds, {self.seconds:.0f} s")


def pages() -> list[str]:
    """The pages the entry script registers (``st.Page("views/x.py", ...)``), read from its source."""
    tree = ast.parse(ENTRY.read_text(encoding="utf-8"))
    return [n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "Page"
            and n.args and isinstance(n.args[0], ast.Constant)]


# ------------------------------------------------------------------------------------------------ the browser's side
# AppTest picks an option by value; a browser picks it by the label it shows, and the page's format_func maps the label
# back. The forced labels below are sent exactly as the browser sends them.
_FORCED = "_crawl_labels"


def _forcing(cls: type, plural: bool) -> None:
    original = cls._widget_state

    def state(self: Any) -> WidgetState:
        labels = self.__dict__.get(_FORCED)
        if labels is None:
            try:
                return original.fget(self)
            except ValueError:  # a value typed into a selectbox that accepts new options: not among its options
                labels = [str(self.value)]
        ws = WidgetState()
        ws.id = self.id
        if plural:
            ws.string_array_value.data[:] = labels
        elif labels:
            ws.string_value = labels[0]
        return ws

    cls._widget_state = property(state)


for _cls, _plural in ((et.Selectbox, False), (et.Radio, False), (et.ButtonGroup, True), (et.Multiselect, True),
                      (et.SelectSlider, True)):
    if not getattr(_cls, "_crawl_patched", False):
        _forcing(_cls, _plural)
        _cls._crawl_patched = True

_deferred: list[tuple[str, Callable[[], Any]]] = []


@contextmanager
def recording_downloads() -> Iterator[None]:
    """Record the deferred downloads a run registers (a callable ``data`` of ``st.download_button``), to build them."""
    from streamlit.runtime.media_file_manager import MediaFileManager

    original = MediaFileManager.add_deferred

    def add(self: Any, data_callable: Callable[[], Any], mimetype: Any, coordinates: str, file_name: str | None = None,
            **kw: Any) -> str:
        _deferred.append((file_name or coordinates, data_callable))
        return original(self, data_callable, mimetype, coordinates, file_name, **kw)

    MediaFileManager.add_deferred = add
    try:
        yield
    finally:
        MediaFileManager.add_deferred = original


# ------------------------------------------------------------------------------------------------ finding widgets
WIDGET_KINDS = ("selectbox", "radio", "button_group", "multiselect", "select_slider", "toggle", "checkbox",
                "number_input", "slider", "text_input", "text_area", "button", "file_uploader")


def widgets(at: AppTest) -> dict[Ref, Any]:
    """Every widget the last run drew (main area and sidebar), by its :class:`Ref`; disabled ones left out."""
    out: dict[Ref, Any] = {}
    seen: dict[tuple[str, str], int] = {}
    for kind in WIDGET_KINDS:
        for w in at.get(kind):
            label = getattr(w, "label", "") or ""
            n = seen.get((kind, label), 0)
            seen[(kind, label)] = n + 1
            if getattr(w.proto, "disabled", False):
                continue
            key = w.key if w.key and not w.key.startswith("$$") else None
            out[Ref(kind, key, label, 0 if key else n)] = w
    for group in tab_groups(at):
        out[Ref("tabs", group.key, "", 0)] = group
    return out


@dataclass(frozen=True)
class TabGroup:
    """An ``st.tabs`` whose open tab is state (a key; ``bind`` or ``on_change``): only the open tab is drawn, so a
    user reaches the others' widgets by opening them."""

    key: str
    labels: tuple[str, ...]
    open: str


def tab_groups(at: AppTest) -> list[TabGroup]:
    """The keyed tab groups the last run drew, with their labels and the open one."""
    out = []

    def walk(node: Any) -> None:
        if getattr(node, "type", None) == "tab_container":
            proto = node.proto.tab_container
            key = proto.id.split("-", 2)[-1] if proto.id.startswith("$$ID-") else ""
            labels = tuple(c.proto.label for c in node.children.values())
            if key and labels:
                now = at.session_state[key] if key in at.session_state else (proto.default_tab_label or labels[0])
                out.append(TabGroup(key, labels, now))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return out


def _labels(w: Any) -> list[str]:
    return list(w.options)


def _current_labels(w: Any) -> list[str]:
    try:
        if isinstance(w, (et.Multiselect, et.ButtonGroup)):
            return list(w.values if isinstance(w, et.Multiselect) else w.formatted_values)
        if isinstance(w, (et.Selectbox, et.Radio)):
            return [] if w.index is None else [w.options[w.index]]
    except (KeyError, ValueError, TypeError, AssertionError):
        pass
    return []


def moves(ref: Ref, w: Any, cap: int | None = None) -> list[Move]:
    """What a user can do to this widget, from its current state (``cap``: at most that many options of a choice)."""
    kind = ref.kind
    if kind == "tabs":
        return [Move(ref, "tab", label, label=f"tab {label}") for label in w.labels if label != w.open]
    if kind in ("selectbox", "radio", "button_group", "select_slider"):
        now = _current_labels(w)
        opts = [o for o in _labels(w) if [o] != now]
        opts = _spread(opts, cap)
        out = [Move(ref, "option", [o], label=o) for o in opts]
        single = kind == "button_group" and w.proto.click_mode == w.proto.ClickMode.SINGLE_SELECT
        if single and now and not getattr(w.proto, "required", False):  # a click on the chosen option clears it
            out.append(Move(ref, "option", [], label="(deselected)"))
        if kind == "selectbox" and getattr(w.proto, "accept_new_options", False):
            out += [Move(ref, "option", [t], label=f"typed {name}") for name, t in HOSTILE_TEXT.items()]
        return out
    if kind == "multiselect":
        opts = _labels(w)
        out = [Move(ref, "options", [], label="(none)")]
        out += [Move(ref, "options", [o], label=f"only {o}") for o in _spread(opts, cap)]
        limit = int(getattr(w.proto, "max_selections", 0) or 0)
        out.append(Move(ref, "options", opts[:limit] if limit else opts, label="(all)"))
        return out
    if kind in ("toggle", "checkbox"):
        return [Move(ref, "value", not bool(w.value), label=f"flipped to {not bool(w.value)}")]
    if kind == "number_input":
        lo = w.min if w.min is not None else -NO_BOUND
        hi = w.max if w.max is not None else NO_BOUND
        return [Move(ref, "value", v, label=f"{name} {v!r}") for name, v in (("min", lo), ("max", hi)) if v != w.value]
    if kind == "slider":
        lo, hi = w.min, w.max
        if isinstance(w.value, (list, tuple)):
            return [Move(ref, "value", [lo, hi], label="full range"), Move(ref, "value", [lo, lo], label="empty range")]
        return [Move(ref, "value", v, label=f"{name} {v!r}") for name, v in (("min", lo), ("max", hi)) if v != w.value]
    if kind in ("text_input", "text_area"):
        bound = int(getattr(w.proto, "max_chars", 0) or 0)
        out = [Move(ref, "value", "", label="empty")]
        if bound:
            out += [Move(ref, "value", _long(bound), label=f"at its bound ({bound})"),
                    Move(ref, "value", _long(bound + 1), label=f"past its bound ({bound + 1})"),
                    Move(ref, "value", "x" * (bound + 1), label=f"one word past its bound ({bound + 1})")]
        else:
            out += [Move(ref, "value", _long(HUGE_TEXT), label=f"huge ({HUGE_TEXT:,} characters)"),
                    Move(ref, "value", "x" * HUGE_TEXT, label=f"one huge word ({HUGE_TEXT:,} characters)")]
        out += [Move(ref, "value", t, label=name) for name, t in HOSTILE_TEXT.items()]
        return out
    if kind == "button":
        return [Move(ref, "click", True, label="pressed")]
    if kind == "file_uploader":
        suffix = (list(w.proto.type) or [".txt"])[0]
        suffix = suffix if suffix.startswith(".") else f".{suffix}"
        return [Move(ref, "upload", (f"crawl-{name}{suffix}", data, "application/octet-stream"), label=f"upload {name}")
                for name, data in HOSTILE_FILES.items()]
    return []


def _spread(items: list, cap: int | None) -> list:
    """``items``, or ``cap`` of them spread from the first to the last."""
    if cap is None or len(items) <= cap:
        return items
    if cap == 1:
        return [items[0]]
    step = (len(items) - 1) / (cap - 1)
    return [items[i] for i in dict.fromkeys(round(i * step) for i in range(cap))]


def _long(n: int) -> str:
    words = itertools.cycle(["the", "cat", "sat", "on", "the", "mat", "because", "it", "was", "tired"])
    text = ""
    while len(text) < n:
        text += next(words) + " "
    return text[:n]


def apply(at: AppTest, move: Move) -> bool:
    """Make ``move`` on the page ``at`` last drew; False when its widget (or option) is not there to move."""
    w = widgets(at).get(move.ref)
    if w is None:
        return False
    if move.how == "tab":  # a click on the tab: its state changes, the page reruns
        if move.value not in w.labels:
            return False
        at.session_state[w.key] = move.value
        return True
    if move.how in ("option", "options"):
        if any(o not in w.options for o in move.value) and not move.label.startswith("typed"):
            return False
        w.__dict__[_FORCED] = list(move.value)
    elif move.how == "click":
        w.click()
    else:
        w.set_value(move.value)
    form = getattr(w, "form_id", "") or getattr(w.proto, "form_id", "")
    if form and move.how != "click":
        # In a form a value counts once the form is submitted: press its submit button too, as a user would.
        for b in at.get("button"):
            if getattr(b.proto, "form_id", "") == form and getattr(b.proto, "is_form_submitter", False):
                b.click()
                break
    return True


# ------------------------------------------------------------------------------------------------ running states
class _Unexpected(logging.Handler):
    """The exceptions the app logged as unexpected (app/ui/errors.py), to name them beside the message the page shows."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            err = record.exc_info[1]
            frames = traceback.extract_tb(err.__traceback__)
            where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(frames) if str(ROOT) in f.filename
                          and ".venv" not in f.filename), "?")
            self.seen.append(f"{type(err).__name__}: {str(err)[:300]} (at {where})")


_unexpected = _Unexpected()
logging.getLogger("bert_family_explorer").addHandler(_unexpected)
# Deferred downloads run outside a script run (as a browser's click does): Streamlit warns about each; noise here.
logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)


def problems(at: AppTest) -> list[str]:
    """What on the page a user must never see: an exception box or the "unexpected" message (with the logged cause)."""
    out = [f"exception: {e.value}"[:600] for e in at.exception]
    if any(UNEXPECTED in e.value for e in at.error):
        out += [f"unexpected: {cause}" for cause in _unexpected.seen] or ["unexpected (no logged cause)"]
    _unexpected.seen.clear()
    return out


#: What each download built so far came to (None: it built; else its failure), by :func:`_inputs_key`.
_built: dict[str, str | None] = {}


def _inputs_key(make: Callable[[], Any]) -> str | None:
    """A digest of everything a deferred download is built from: its function's code, the values it closes over and
    the globals it names (a module by its name), its defaults, a bound method's object, and the state of the results
    database it may read (its file's and its write-ahead log's size and time). None where one of them cannot be
    pickled, and where the code names Streamlit (it may read the session's state): then it is built every time."""
    import hashlib
    import inspect
    import pickle
    import types

    db = os.environ.get("DATABASE_URL", "").removeprefix("sqlite:///")
    stamp = [(p, st.st_size, st.st_mtime_ns) for p in (db, db + "-wal") if os.path.isfile(p) and (st := os.stat(p))]
    fn, parts = make, [os.environ.get("DATABASE_URL"), stamp]
    if inspect.ismethod(fn):
        parts.append(fn.__self__)
        fn = fn.__func__
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    names, todo = set(), [code]
    while todo:  # the code's own names and those of the code nested in it (a comprehension, an inner lambda)
        c = todo.pop()
        names |= set(c.co_names)
        todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    named = []
    for name in sorted(names & set(fn.__globals__)):
        value = fn.__globals__[name]
        if isinstance(value, types.ModuleType):
            if value.__name__.split(".")[0] == "streamlit":
                return None
            value = ("module", value.__name__)
        named.append((name, value))
    parts += [code.co_filename, code.co_firstlineno, code.co_code, fn.__defaults__, fn.__kwdefaults__,
              [c.cell_contents for c in fn.__closure__ or ()], named]
    try:
        return hashlib.sha1(pickle.dumps(parts, protocol=pickle.HIGHEST_PROTOCOL)).hexdigest()
    except Exception:  # a local function, a lock, a connection: not comparable, so built
        return None


def build_downloads() -> list[str]:
    """Build every deferred download the last run offered, as a click would; the failures. A download whose inputs are
    exactly those of one already built (:func:`_inputs_key`: the rerun of a state, a widget that did not change what
    is downloaded) is not built again: the same function of the same values gives the same file, or the same error."""
    out = []
    for name, make in _deferred:
        key = _inputs_key(make)
        if key is not None and key in _built:
            failure = _built[key]
        else:
            try:
                failure = None if make() is not None else "no data"
            except Exception as err:
                failure = f"{type(err).__name__}: {err}"
            if key is not None:
                _built[key] = failure
        if failure:
            out.append(f"download {name}: {failure}"[:600])
    _deferred.clear()
    return out


def open_page(page: str, query: dict[str, str] | None = None, timeout: float = 120, *,
              prelude: tuple[tuple[str, Move], ...] = (), entry: Path = ENTRY) -> AppTest:
    """``page``, as a browser opens a link to it (``query``: the link's parameters): the entry script runs with the page
    chosen, and no other page runs first. ``prelude``: (page, move) pairs made on the way, as a user who clicked
    elsewhere first (the app opened on Home, then each page clicked); a move that cannot be made fails loudly (the
    prelude is the crawl's setup, not a state). ``entry``: another script to open alone (the crawler's own test)."""
    at = AppTest.from_file(str(entry), default_timeout=timeout)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    home = pages()[0]
    if entry == ENTRY and not prelude and page != home:
        # Before a first run AppTest finds a page by its file's stem, which is each st.Page's url_path here; checked
        # below, so a page given another url_path one day fails loudly instead of crawling Home in its place.
        at.switch_page(page)
        at.run()
        if at._finished_page_script_hash != calc_hash(Path(page).stem):
            raise AssertionError(f"{page} did not open from a link to it (its url_path is not its file's stem?)")
        return at
    at.run()
    if entry != ENTRY:
        return at
    for where, move in prelude:
        if where != home:
            at.switch_page(where).run()
        if not apply(at, move):
            raise AssertionError(f"the crawl's prelude could not make {move} on {where}")
        at.run()
    if page != home or prelude:
        at.switch_page(page).run()
    return at


def run_state(page: str, path: tuple[Move, ...], query: dict[str, str] | None = None, *,
              prelude: tuple[tuple[str, Move], ...] = (), entry: Path = ENTRY, world: Any = None) -> tuple[bool, list[str], AppTest]:
    """Open ``page`` (with ``query``, after ``prelude``), make each move of ``path`` and run it twice (the move, then a
    rerun with the state kept). Returns whether every move could be made, the problems of the state reached (those of
    the states on the way are their own: each is crawled by itself), and the last AppTest.

    ``world``: what names the world the page opens in (:class:`Worlds`' current copy, its folder); given, a state with moves starts
    from a copy of the page as it opened in that world (:func:`opened`) instead of opening it again: the same session,
    tree and address a new open gives, without running the page once more. A move that would call back into the page
    (an ``on_click``/``on_change``, a form's submit) is made on a page opened anew: a callback holds the objects of the
    run that registered it (a page's module globals), which are the opened page's, not the copy's. None: always
    opened anew."""
    _deferred.clear()
    _unexpected.seen.clear()
    copied = bool(path) and world is not None
    if copied:
        at = opened(page, query, prelude, entry, world)
        found: list[str] = []
    else:
        at = open_page(page, query, prelude=prelude, entry=entry)
        found = problems(at) + build_downloads()
    if not path:  # the defaults, a link's parameters, presentation mode: rerun with the state kept too
        at.run()
        found += problems(at) + build_downloads()
    for move in path:
        if copied and calls_back(at, move):
            return run_state(page, path, query, prelude=prelude, entry=entry)
        if not apply(at, move):
            return False, found, at
        at.run()
        found = problems(at) + build_downloads()
        at.run()
        found += problems(at) + build_downloads()
    return True, found, at


# AppTest keeps a run's element tree, not the messages it was parsed from: record them, so a copy of an opened page gets
# a tree of its own (moves set values on the tree's widgets) parsed from the same messages.
_parse_tree = local_script_runner.parse_tree_from_messages


def _recording_parse(messages: list[Any]) -> et.ElementTree:
    tree = _parse_tree(messages)
    tree._crawl_messages = list(messages)
    return tree


local_script_runner.parse_tree_from_messages = _recording_parse
#: The page as it last opened: ((page, query, prelude, entry, world), AppTest), or None.
_opened: list[tuple[tuple, AppTest]] = []


def opened(page: str, query: dict[str, str] | None, prelude: tuple[tuple[str, Move], ...], entry: Path, world: Any) -> AppTest:
    """A copy of ``page`` as it opens (:func:`open_page`) in ``world``: opened once per page, link and world, then
    copied (:func:`copy_app`) for each state. Opening is a full run of the page, about a third of a one-move state's
    time; its problems are the defaults' state's, found there."""
    key = (page, tuple(sorted((query or {}).items())), prelude, str(entry), world)
    if not _opened or _opened[0][0] != key:
        _opened.clear()
        at = open_page(page, query, prelude=prelude, entry=entry)
        problems(at)  # the defaults' state's, not this one's
        _deferred.clear()
        _opened.append((key, at))
    try:
        return copy_app(_opened[0][1])
    except Exception:  # a session that cannot be copied (a lock in it): opened anew, as before
        return open_page(page, query, prelude=prelude, entry=entry)


def calls_back(at: AppTest, move: Move) -> bool:
    """Whether making ``move`` on the page ``at`` drew runs a callback the page registered: the moved widget's, or, in a
    form, any of the form's (its submit button is pressed with it)."""
    w = widgets(at).get(move.ref)
    if w is None:
        return False
    metadata = at._session_state._state._new_widget_state.widget_metadata
    ids = {getattr(w, "id", None)}
    form = getattr(w, "form_id", "") or getattr(getattr(w, "proto", None), "form_id", "")
    if form:
        ids |= {x.id for kind in WIDGET_KINDS for x in at.get(kind) if getattr(x.proto, "form_id", "") == form}
    if move.how == "tab":  # a keyed tab group's callback, if it has one, is registered under its own id
        ids |= {wid for wid in metadata if wid.endswith(f"-{w.key}")}
    return any(getattr(metadata.get(i), "callback", None) is not None for i in ids if i)


def _shared(at: AppTest) -> dict[int, Any]:
    """A deep copy's memo that shares the plotly figures of the widgets' callback arguments ("Add to pack" holds its
    chart's figure) instead of copying them: a figure is copied by building it anew, with every property validated
    again (half of a chart page's crawl went to that), and the callback only serialises it (``services.pack.add``)."""
    from plotly.basedatatypes import BaseFigure

    memo: dict[int, Any] = {}
    for meta in at._session_state._state._new_widget_state.widget_metadata.values():
        for arg in (*(meta.callback_args or ()), *(meta.callback_kwargs or {}).values()):
            if isinstance(arg, BaseFigure):
                memo[id(arg)] = arg
    return memo


def copy_app(at: AppTest) -> AppTest:
    """An AppTest in the state ``at`` is in, sharing nothing a run or a move changes: its session state, address,
    element tree (parsed again from the run's messages), fragments and forms are its own. (``copy.deepcopy`` of an
    AppTest fails on its session's lock, and of its tree breaks the elements' attribute lookup.)"""
    from streamlit.runtime.fragment import MemoryFragmentStorage
    from streamlit.runtime.state.safe_session_state import SafeSessionState
    from streamlit.testing.v1.app_test import _AppTestSessionState

    new = AppTest.__new__(AppTest)
    new.__dict__.update(at.__dict__)
    new._session_state = SafeSessionState(copy.deepcopy(at._session_state._state, _shared(at)), lambda: None)
    new.session_state = _AppTestSessionState(new._session_state)
    for name in ("query_params", "secrets", "user", "context", "_registered_pages", "_cleared_form_ids"):
        setattr(new, name, copy.deepcopy(getattr(at, name)))
    tree = _parse_tree(at._tree._crawl_messages)
    tree._crawl_messages, tree._runner = at._tree._crawl_messages, new
    new._tree = tree
    fragments = MemoryFragmentStorage()
    for name, value in vars(at._fragment_storage).items():
        if name != "_lock":
            setattr(fragments, name, copy.deepcopy(value))
    new._fragment_storage = fragments
    return new


def open_tab(page: str, move: Move, *, prelude: tuple[tuple[str, Move], ...] = (), entry: Path = ENTRY,
             world: Any = None) -> AppTest | None:
    """``page`` with the tab of ``move`` open (None where it cannot be opened)."""
    try:
        ok, _, at = run_state(page, (move,), prelude=prelude, entry=entry, world=world)
    except Exception:
        return None
    return at if ok else None


def choice(move: Move) -> bool:
    return move.ref.kind in (*CHOICE_KINDS, "multiselect", "toggle", "checkbox") and not move.label.startswith("typed")


class Worlds:
    """Fresh worlds for the states that write: :meth:`ready` points the app at a copy of the world as it was when this
    object was made (the SQLite results database named by ``DATABASE_URL`` and the model folder ``BFE_MODEL_DIR``)
    whenever the world the app points at is not that one any more, and then empties Streamlit's caches, as on a new
    server. Whether a world was written is detected, not guessed from the move: the database's bytes (and its
    write-ahead log's) and the model folder's files (names, sizes, times) against what they were when the copy was
    made. Copies live under ``root``; the previous one is removed."""

    def __init__(self, root: Path) -> None:
        from analysis import results_db

        url = os.environ.get("DATABASE_URL", "")
        if not url.startswith("sqlite:///"):
            raise ValueError(f"fresh worlds copy a SQLite file; DATABASE_URL is {url.split(':')[0]!r}")
        results_db.ensure_seeded(results_db.get_engine())
        results_db.dispose_engines()  # every connection closed: the file holds everything (no write-ahead log left)
        self.root = root
        self.start = root / "start"
        self.start.mkdir(parents=True, exist_ok=True)
        shutil.copy2(url.removeprefix("sqlite:///"), self.start / "results.db")
        shutil.copytree(os.environ["BFE_MODEL_DIR"], self.start / "models", dirs_exist_ok=True, symlinks=True)
        self.made = 0
        self._made_as: tuple | None = None

    @property
    def here(self) -> Path:
        return self.root / f"world{self.made}"

    def _signature(self) -> tuple:
        import hashlib

        db = self.here / "results.db"
        files = [f for f in (db, db.with_name("results.db-wal")) if f.is_file() and f.stat().st_size]
        digests = []
        for f in files:
            with f.open("rb") as fh:
                digests.append(hashlib.file_digest(fh, "sha1").hexdigest())
        models = self.here / "models"
        listing = tuple((str(p.relative_to(models)), st.st_size, st.st_mtime_ns)
                        for p in sorted(models.rglob("*")) if p.is_file() and (st := p.stat()))
        return tuple(digests), listing

    def written(self) -> bool:
        """Whether the world the app points at is no longer the start: never made yet, or written since it was."""
        return self._made_as is None or self._signature() != self._made_as

    def ready(self) -> bool:
        """Point the app at an unwritten copy of the start world, making a new one only when the current one was
        written (:meth:`written`). Returns whether a copy was made."""
        if not self.written():
            return False
        self()
        return True

    def __call__(self) -> None:
        """A new copy of the start world, and empty caches, whatever the current one holds."""
        import streamlit as st

        from analysis import results_db
        from models import cache

        results_db.dispose_engines()
        if self.made:
            shutil.rmtree(self.here, ignore_errors=True)
        self.made += 1
        here = self.here
        here.mkdir()
        shutil.copy2(self.start / "results.db", here / "results.db")
        shutil.copytree(self.start / "models", here / "models", symlinks=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{here / 'results.db'}"
        os.environ["BFE_MODEL_DIR"] = str(here / "models")
        cache._default_cache = None
        st.cache_data.clear()
        st.cache_resource.clear()
        self._made_as = self._signature()


def url_defaults(page: str) -> dict[str, Any]:
    """The URL keys a page declares: the dict it passes first to ``restore_url_state``, read from its source, key by key;
    a value that is not a literal (a constant from elsewhere, a call) is given as "" (the crawl then sends "" as the
    valid value and the malformed and out-of-range ones beside it). {} where the page keeps no URL state."""
    path = Path(page) if Path(page).is_absolute() else ENTRY.parent / page
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = next((n.args[0].id for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") ==
                 "restore_url_state" and n.args and isinstance(n.args[0], ast.Name)), None)
    if name is None:
        return {}
    out: dict[str, Any] = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
        if getattr(target, "id", "") == name and isinstance(node.value, ast.Dict):
            for k, v in zip(node.value.keys, node.value.values, strict=True):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    try:
                        out[k.value] = ast.literal_eval(v)
                    except ValueError:
                        out[k.value] = ""
    return out


def _url_text(value: Any) -> str:
    """A value as the page writes it into its address (app/ui/state.py's format)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


#: Widgets the entry script draws in the sidebar of every page, the same on each (the class panel outside a class):
#: crawled with Home's states only, not again with each page's.
SHARED_SIDEBAR = frozenset({"class_code_typed", "class_join", "class_hours", "class_start"})
#: What starts a class as its teacher (the sidebar's button), for a crawl of the pages a class sees.
START_CLASS = Move(Ref("button", "class_start", "Start a class"), "click", True)
#: The pages that ask a class, the key of their question (its "Ask" button is ``<key>_ask``), and the tab it is on
#: (its group's key and label) where it is not on the first.
QUESTIONS = {"views/calculator.py": ("sz_fit_q", ("sz_tab", "Training memory")), "views/objectives.py": ("ob_fill_q", None),
             "views/attention.py": ("at_q", None)}


def asked(page: str) -> tuple[tuple[str, Move], ...]:
    """A teacher's way to ``page`` with its question open: a class started on Home, its tab opened, "Ask" pressed."""
    key, tab = QUESTIONS[page]
    opened = ((page, Move(Ref("tabs", tab[0], ""), "tab", tab[1], label=f"tab {tab[1]}")),) if tab else ()
    return ((pages()[0], START_CLASS), *opened, (page, Move(Ref("button", f"{key}_ask", "Ask"), "click", True)))


def preludes(page: str) -> tuple[tuple[str, Move], ...]:
    """What a user does on other pages before this one is worth crawling: the pack page holds what was added to the
    pack elsewhere (a chart on Home, a table on the results page), so its widgets for charts and tables are there."""
    if page.endswith("pack.py"):
        return (("views/home.py", Move(Ref("button", "home_chart_plot_pack", "Add to pack"), "click", True)),
                ("views/results.py", Move(Ref("button", "gl_table_pack", "Add table to pack"), "click", True)))
    return ()


def crawl_page(page: str, *, pairs: bool = True, pair_cap: int = 3, single_cap: int | None = 40,
               sample: int | None = None, mark_sample: int | None = None, url: bool = True,
               log: Callable[[str], None] | None = None,
               prelude: tuple[tuple[str, Move], ...] = (), entry: Path = ENTRY, fresh: Worlds | None = None) -> Crawl:
    """Crawl one page: its defaults and presentation mode; every widget moved once from the defaults; every pair of
    choice widgets (each capped at ``pair_cap`` options), and after each choice every widget it reveals (each move of it,
    capped the same); every URL key the page writes or declares, with a valid, a malformed and out-of-range values.
    ``sample``: every n-th single move and URL key, no pairs (the quick crawl of the default suite); ``mark_sample``:
    count apart the states such a sample takes (:meth:`Crawl.sample`), so one crawl answers for both. ``prelude`` and ``entry``: as
    :func:`open_page` takes them. ``fresh``: the page's worlds; every state starts from an unwritten one (a copy is
    made only where the state before wrote: :meth:`Worlds.ready`)."""
    result = Crawl(page)
    t0 = time.perf_counter()

    def visit(path: tuple[Move, ...], query: dict[str, str] | None = None, what: str = "", sampled: bool = False) -> AppTest | None:
        if fresh is not None and fresh.ready():
            result.worlds += 1
        try:
            ok, found, at = run_state(page, path, query, prelude=prelude, entry=entry,
                                      world=None if fresh is None else fresh.here)
        except Exception as err:
            ok, found, at = True, [f"crawler: {type(err).__name__}: {str(err)[:300]}"], None
        if not ok:
            result.skipped += 1
            return None
        result.states += 1
        result.sample_states += sampled
        name = what or " → ".join(map(str, path)) or "defaults"
        if found:
            result.failures.append(f"{page} [{name}]: " + " | ".join(dict.fromkeys(found)))
            if sampled:
                result.sample_failures.append(result.failures[-1])
        if log:
            log(f"{page} #{result.states}: {name}" + (" FAIL" if found else ""))
        return at

    with recording_downloads():
        every = sample or mark_sample or 0
        base = visit((), sampled=True)
        visit((), {"present": "1"}, "presentation mode", sampled=True)
        if base is None:
            return result
        shown = {ref: w for ref, w in widgets(base).items() if page == pages()[0] or ref.key not in SHARED_SIDEBAR}
        # Only the open tab of a keyed tab group is drawn: each other tab is opened, and what it shows is crawled as
        # if it were on the page (each of its moves after the tab's).
        paths: list[tuple[Move, ...]] = [(m,) for ref, w in shown.items() for m in moves(ref, w, single_cap)]
        for tab in [m for m in list(paths) if m[0].how == "tab"]:
            if fresh is not None and fresh.ready():
                result.worlds += 1
            tabbed = open_tab(page, tab[0], prelude=prelude, entry=entry, world=None if fresh is None else fresh.here)
            if tabbed is None:
                continue
            for ref, w in widgets(tabbed).items():
                if ref not in shown and ref.key not in SHARED_SIDEBAR and ref.kind != "tabs":
                    shown[ref] = w
                    paths += [(tab[0], m) for m in moves(ref, w, single_cap)]
        if sample:
            paths = paths[::sample]
        url_values: dict[str, set[str]] = {}
        firsts: dict[Ref, list[tuple[Move, ...]]] = {}
        for i, path in enumerate(paths):
            at = visit(path, sampled=bool(sample or (every and i % every == 0)))
            if at is None:
                continue
            for k in at.query_params:
                url_values.setdefault(k, set()).add(at.query_params[k][0] if isinstance(at.query_params[k], list)
                                                    else at.query_params[k])
            move = path[-1]
            if sample or not pairs or not choice(move):
                continue
            firsts.setdefault(move.ref, []).append(path)
            for ref, w in widgets(at).items():  # what this choice revealed, moved in turn
                if ref not in shown and ref.key not in SHARED_SIDEBAR:
                    for second in moves(ref, w, pair_cap):
                        visit((*path, second))
        if pairs and not sample:
            for ref_a, ref_b in itertools.combinations(list(firsts), 2):
                for a, b in itertools.product(_spread(firsts[ref_a], pair_cap), _spread(firsts[ref_b], pair_cap)):
                    visit((*a, *(m for m in b if m not in a)))
        if url:
            declared = {k: _url_text(v) for k, v in url_defaults(page).items()} if entry == ENTRY else {}
            keys = [k for k in sorted(set(url_values) | set(declared)) if k != "present"]
            for i, key in enumerate(keys[::sample] if sample else keys):
                valid = sorted(url_values[key])[0] if key in url_values else declared[key]
                for name, value in (("valid", valid), ("malformed", "\x00<b>not-a-value</b>,,;"), *_out_of_range(valid)):
                    visit((), {key: value}, f"?{key}= {name} {value[:40]!r}", sampled=bool(sample or (every and i % every == 0)))
    result.seconds = time.perf_counter() - t0
    return result


def _out_of_range(valid: str) -> list[tuple[str, str]]:
    """Values past what a URL key accepts: for a number, below zero and past any bound; for a choice, an option the
    page does not offer and a huge text."""
    try:
        float(valid)
    except ValueError:
        return [("not offered", "no-such-option"), ("huge", _long(HUGE_TEXT))]
    return [("below zero", "-1" if not valid.startswith("-") else "-1e308"), ("past any bound", "1e308")]
