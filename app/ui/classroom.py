"""A class that follows its teacher: the sidebar's class panel (start, join, end, leave, the join link and QR code),
a follower's page kept on the teacher's, and "predict, then reveal" on the pages that ask the class.

The class lives in the results database (:mod:`services.classroom`); this module keeps only the browser's part in
``st.session_state["class"]``: the code, the teacher key (a teacher) or the member id (a student), whether it
follows, and the class version it last applied. The teacher key also goes into a cookie of the teacher's browser, so
a reload keeps the class (the join link never carries it).

A follower's sidebar holds a small fragment that polls the class every :data:`POLL_S` seconds (one indexed row and
two counts): only when the class's version changed does it rerun the page, which then goes where the teacher is
(:func:`class_panel`, before the page draws). The follower's page reruns the teacher's cached model calls, so it runs
no model call the teacher's page did not.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import streamlit as st

from app.ui.charts import chart
from app.ui.errors import show_error
from app.ui.state import URL_TABS, context_url
from core.errors import ExplorerError

#: How often a member's page asks the class for news (seconds): a change reaches a follower within about this long
#: plus a page run.
POLL_S = 1.0
#: How old (seconds) the class's state a page draws may be when another page of this server read it just before:
#: the class's pages share one read of it instead of each polling the database (a change made on this server is seen
#: at once; one made through another replica within this).
NEWS_S = POLL_S / 2
#: The teacher's live count of answers is refreshed this often (seconds).
COUNT_S = 2.0
COOKIE = "bfe_teacher"
#: Session keys a follow keeps (the rest of the page's URL state is replaced by the teacher's).
_KEEP = ("class", "pack", "present")


@dataclass
class Seat:
    """This browser's place in a class: its code, the teacher key or the member id, whether it follows."""

    code: str
    key: str = ""
    member: str = ""
    following: bool = True
    seen: int = -1  # the class version this page last applied
    question: tuple[int, str] | None = None  # the (id, status) of the question this page last drew
    redraw: bool = False  # a follow moved this page to another: draw it once more (see _poll)

    @property
    def teacher(self) -> bool:
        return bool(self.key)


def seat() -> Seat | None:
    """This browser's seat in a class, or None."""
    return st.session_state.get("class")


def _pages(pages: list[Any]) -> dict[str, Any]:
    return {p.url_path: p for p in pages}


def _set_cookie(value: str, max_age: int) -> None:
    # Streamlit reads cookies (st.context.cookies) but cannot set one; a script in the page does. The value is the code
    # and a URL-safe token, checked before it is written, so nothing the visitor typed reaches the script.
    st.sidebar.html(f"<script>document.cookie = '{COOKIE}={value}; path=/; max-age={max_age}; SameSite=Strict';</script>",
            unsafe_allow_javascript=True)


def _resume_teacher() -> None:
    """A teacher's reload: the cookie's code and key, if they still lead a running class."""
    try:
        raw = st.context.cookies.get(COOKIE)
    except Exception:
        return
    if not isinstance(raw, str) or len(raw) > 200:  # no cookie (or not a browser's: a test's stand-in)
        return
    code, _, key = raw.partition(".")
    if not (code and key):
        return
    from services import classroom

    if classroom.is_teacher(code, key):
        st.session_state["class"] = Seat(code=code, key=key)


def _join(code: str) -> None:
    from services import classroom

    try:
        member = classroom.join_class(code)
    except ExplorerError as err:
        st.session_state["class_error"] = err
        return
    st.session_state["class"] = Seat(code=classroom.normalise_code(code), member=member)


def _join_typed() -> None:
    _join(st.session_state.get("class_code_typed", ""))


def _start() -> None:
    from services import classroom

    hours = st.session_state.get("class_hours", 3)
    try:
        started = classroom.start_class(hours)
    except ExplorerError as err:
        st.session_state["class_error"] = err
        return
    st.session_state["class"] = Seat(code=started.code, key=started.key)
    st.session_state["class_cookie"] = (f"{started.code}.{started.key}", hours * 3600)


def _end() -> None:
    from services import classroom

    me = seat()
    st.session_state.pop("class", None)
    if me and me.teacher:
        st.session_state["class_cookie"] = ("", 0)
        try:
            classroom.end_class(me.code, me.key)
        except ExplorerError as err:
            st.session_state["class_error"] = err
    st.query_params.pop("class", None)


def _toggle_follow() -> None:
    me = seat()
    if me:
        me.following = bool(st.session_state.get("class_follow", True))
        me.seen = -1  # rejoining goes where the teacher is now


def _go(target: Any, pages: dict[str, Any], here: Any, me: Seat) -> None:
    """Put this page where the teacher is: the teacher's URL state replaces this page's (its widgets, restored from
    the address), on the teacher's page."""
    shadow = st.session_state.pop("_url_shadow", {})
    for key in shadow:
        if key not in _KEEP:
            st.session_state.pop(key, None)
    for key, default in URL_TABS.items():  # Streamlit keeps these in the address itself: set through their state
        st.session_state[key] = target.query.get(key, default)
    query = {k: v for k, v in target.query.items() if k not in URL_TABS} | {"class": me.code}
    if st.query_params.get("present") == "1":
        query["present"] = "1"
    page = pages.get(target.page)
    if page is not None and page.url_path != here.url_path:
        me.redraw = True
        st.switch_page(page, query_params=query)
    st.query_params.from_dict(query)


def class_panel(pages: list[Any], here: Any) -> None:
    """The sidebar's class panel, and a follower's move to the teacher's page; call it before the page draws. Outside
    a class it imports nothing of the database (pages that need none stay light)."""
    from services import classroom as limits

    if cookie := st.session_state.pop("class_cookie", None):
        _set_cookie(*cookie)
    if seat() is None and "class_tried" not in st.session_state:
        st.session_state["class_tried"] = True
        if code := st.query_params.get("class"):
            _join(code)
        else:
            _resume_teacher()
    me = seat()
    st.session_state["class_here"] = here.url_path
    box = st.sidebar.expander("Class" + (f" {me.code}" if me else ""), expanded=me is not None,
                              icon=":material/groups:")
    if err := st.session_state.pop("class_error", None):
        with box:
            show_error(err)
    if me is None:
        box.caption("A teacher starts a class; students join it with its code and their page follows the teacher's.")
        c1, c2 = box.columns([3, 2], vertical_alignment="bottom")
        c1.text_input("Class code", key="class_code_typed", max_chars=12, placeholder="K7MQ2X")
        c2.button("Join", key="class_join", on_click=_join_typed, width="stretch")
        c1, c2 = box.columns([3, 2], vertical_alignment="bottom")
        c1.selectbox("Hours", list(range(limits.MIN_HOURS, limits.MAX_HOURS + 1)), index=limits.DEFAULT_HOURS - 1,
                     key="class_hours", help="The class and its answers are deleted when it ends or after this long.")
        c2.button("Start a class", key="class_start", on_click=_start, width="stretch")
        return
    from services import classroom

    try:
        state = classroom.class_state(me.code, me.member or None, me.following if not me.teacher else None, max_age=NEWS_S)
    except classroom.ClassNotFound as err:
        st.session_state.pop("class", None)
        with box:
            show_error(err)
        return
    me.question = (state.question.id, state.question.status) if state.question else None
    if me.teacher:
        _teacher_panel(box, me, state)
    else:
        _student_panel(box, me, state)
        target = classroom.follow_target(state, here.url_path, st.query_params.to_dict())
        if me.following and state.version != me.seen:
            me.seen = state.version
            if target is not None:
                _go(target, _pages(pages), here, me)
    with box:
        _poll(me)


def _teacher_panel(box: Any, me: Seat, state: Any) -> None:
    from services import classroom

    box.markdown(f"Join code: **`{me.code}`**")
    link = classroom.join_link(context_url(), me.code)
    box.code(link, language=None, wrap_lines=True)
    if link.startswith("http"):  # a relative link (no address known) would not open from a phone
        box.image(classroom.qr_svg(link), caption="Scan to join", width=200)
    box.caption(f"You lead. Ends at {state.expires_at:%H:%M} UTC; then the class and its answers are deleted.")
    box.button("End the class", key="class_end", on_click=_end, icon=":material/logout:")


def _student_panel(box: Any, me: Seat, state: Any) -> None:
    box.toggle("Follow the teacher", key="class_follow", value=me.following, on_change=_toggle_follow,
               help="Off: explore on your own. On again: back to the teacher's page.")
    box.button("Leave the class", key="class_leave", on_click=_end, icon=":material/logout:")


@st.fragment(run_every=POLL_S)
def _poll(me: Seat) -> None:
    """The class's news, every :data:`POLL_S` seconds: how many are in it, and a page rerun when the teacher moved
    (a follower) or a question changed (everyone)."""
    from services import classroom

    try:
        state = classroom.class_state(me.code, me.member or None, max_age=NEWS_S)
    except ExplorerError:
        if st.session_state.get("class") is me:
            st.rerun(scope="app")  # the class ended: the panel says so
        return
    st.caption(f"{state.members} in the class, {state.following} following" if me.teacher else
               f"{state.members} in the class · the teacher leads")
    question = (state.question.id, state.question.status) if state.question else None
    moved = not me.teacher and me.following and state.version != me.seen
    redraw = me.redraw and _on_its_own()
    if st.session_state.get("class") is me and (moved or question != me.question or redraw):
        me.question, me.redraw = question, False
        st.rerun(scope="app")


def _on_its_own() -> bool:
    """Whether this is a run of the fragment alone (its timer), not of the whole page.

    Why a follow that changed page draws the page once more: Streamlit's browser code decides whether a run's page is
    new from its last *drawn* state, so when a busy browser takes the new page's run and this fragment's next run in
    one batch (a slow laptop, a loaded server), the fragment's run seems to change page and clears what the page's run
    drew: the student sees an empty page under a live sidebar. One more run of the page (the page unchanged by then)
    draws it back; it costs one page run per change of page, not per change of a widget."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    return bool(getattr(ctx, "fragment_ids_this_run", None))


def lead_class(here: Any = None) -> None:
    """The teacher's page and address become the class's (written only when they changed); call it after the page
    (``here``: its page), and at the end of a fragment that changes the address (the page's last full run's page)."""
    me = seat()
    if me is None or not me.teacher:
        return
    from services import classroom

    if here is not None:
        st.session_state["class_here"] = here.url_path
    query = classroom.teacher_query(st.query_params.to_dict())
    shown = (st.session_state.get("class_here", ""), query)
    if st.session_state.get("class_led") == shown:
        return
    try:
        classroom.lead(me.code, me.key, shown[0], query)
        st.session_state["class_led"] = shown
    except classroom.ClassNotFound:
        st.session_state.pop("class", None)
    except ExplorerError as err:
        show_error(err)


# --------------------------------------------------------------------------------------------- predict, then reveal
def question_context(*parts: Any) -> str:
    """A question's context: a digest of what the page's answer depends on (:func:`services.classroom.context`)."""
    from services.classroom import context

    return context(*parts)


@dataclass(frozen=True)
class Ask:
    """What a page with a question draws: ``hide`` the model's answer (the class is answering), or ``revealed``
    (the question whose class answers go beside the model's)."""

    hide: bool = False
    revealed: Any = None


def ask_the_class(kind: str, context: str, prompt: str, choices: tuple[str, ...] = (), *, key: str) -> Ask:
    """A question about this page's answer, for a class: the teacher asks and reveals, students answer; while it is
    open, the page hides the model's answer (``Ask.hide``). Outside a class it draws nothing and hides nothing.

    ``context``: :func:`services.classroom.context` of what the answer depends on; a question shows only where it
    matches. ``kind``: ``word`` (a free word) or ``choice`` (one of ``choices``)."""
    me = seat()
    if me is None:
        return Ask()
    from services import classroom

    try:
        state = classroom.class_state(me.code, me.member or None, max_age=NEWS_S)
    except ExplorerError:
        return Ask()
    q = state.question if state.question and state.question.context == context else None
    box = st.container(border=True, key=f"{key}_class")
    if q is None:
        if me.teacher:
            c1, c2 = box.columns([4, 1], vertical_alignment="center")
            c1.markdown(f":material/quiz: **Ask the class first:** {html.escape(prompt)}")
            c2.button("Ask", key=f"{key}_ask", icon=":material/campaign:", on_click=_ask,
                      args=(me, kind, context, prompt, choices), width="stretch")
        return Ask()
    if q.status == "revealed":
        box.markdown(f":material/quiz: **Revealed:** {html.escape(q.prompt)}")
        if me.teacher:
            box.button("Put the question away", key=f"{key}_close", on_click=_teacher_act, args=(classroom.close_question, me, q.id))
        return Ask(revealed=q)
    box.markdown(f":material/quiz: **The class is answering:** {html.escape(q.prompt)}")
    if me.teacher:
        with box:
            _answers_count(me)
        c1, c2 = box.columns(2)
        c1.button("Reveal", key=f"{key}_reveal", type="primary", icon=":material/visibility:", on_click=_teacher_act,
                  args=(classroom.reveal, me, q.id))
        c2.button("Cancel the question", key=f"{key}_cancel", on_click=_teacher_act, args=(classroom.close_question, me, q.id))
    else:
        _answer_form(box, me, q, key)
    box.caption("The model's answer is hidden until the teacher reveals it.")
    return Ask(hide=True)


def _ask(me: Seat, kind: str, context: str, prompt: str, choices: tuple[str, ...]) -> None:
    from services import classroom

    try:
        classroom.ask(me.code, me.key, kind, context, prompt, list(choices))
    except ExplorerError as err:
        st.session_state["class_error"] = err


def _teacher_act(action: Any, me: Seat, qid: int) -> None:
    try:
        action(me.code, me.key, qid)
    except ExplorerError as err:
        st.session_state["class_error"] = err


@st.fragment(run_every=COUNT_S)
def _answers_count(me: Seat) -> None:
    from services import classroom

    try:
        state = classroom.class_state(me.code, max_age=NEWS_S)
    except ExplorerError:
        return
    n = state.question.answers if state.question else 0
    st.metric("Answers so far", n, help=f"{state.members} in the class now.")


def _send(me: Seat, qid: int, key: str) -> None:
    from services import classroom

    try:
        classroom.answer(me.code, me.member, qid, st.session_state.get(f"{key}_answer") or "")
        st.session_state[f"{key}_sent"] = True
    except ExplorerError as err:
        st.session_state[f"{key}_error"] = err


def _answer_form(box: Any, me: Seat, q: Any, key: str) -> None:
    from services.classroom import MAX_ANSWER_CHARS

    if q.choices:
        box.radio("Your answer", q.choices, key=f"{key}_answer", index=q.choices.index(q.mine) if q.mine in q.choices else None,
                  horizontal=len(q.choices) <= 4)
    else:
        box.text_input("Your answer (one word)", key=f"{key}_answer", max_chars=MAX_ANSWER_CHARS,
                       placeholder=q.mine or "")
    box.button("Send" if q.mine is None else "Change my answer", key=f"{key}_send", on_click=_send, args=(me, q.id, key))
    if err := st.session_state.pop(f"{key}_error", None):
        with box:
            show_error(err)
    if q.mine is not None:
        box.caption(f"Your answer: {q.mine} (anonymous; you can change it until the reveal).")


def reveal_chart(question: Any, model: dict[str, float] | None, *, key: str, model_label: str,
                 value_label: str = "probability", sources: tuple[str, ...] = ()) -> None:
    """The revealed question's class answers beside the model's, as a chart with its exports and "Add to pack"."""
    from services import classroom

    fig = classroom.reveal_figure(question, model, model_label=model_label, value_label=value_label)
    n = sum((question.counts or {}).values())
    chart(fig, f"{key}_reveal_chart", title=f"The class and {model_label}: {question.prompt}",
          caption=f"{n} student answer{'s' if n != 1 else ''} (anonymous) beside {model_label}'s {value_label}.",
          sources=(*sources, "Class answers collected by BERT Family Explorer"))
