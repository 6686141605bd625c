"""A class follows its teacher: two AppTest sessions (a teacher's browser and a student's) on one results database.

The student's page goes where the teacher's is, with its address; "predict, then reveal" hides the model's answer
while the class answers, counts the answers and reveals them beside the model's; a student stops following and
rejoins; bad codes get a message."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from analysis.results_db import classes as cl
from tests.helpers import ENTRY
from tests.helpers.pages import markdown


def _app(**query: str) -> AppTest:
    at = AppTest.from_file(ENTRY, default_timeout=90)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def _ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert "Something unexpected" not in "".join(e.value for e in at.error), [e.value for e in at.error]
    return at


def _button(at: AppTest, key: str) -> AppTest:
    return _ok(at.button(key=key).click().run())


def _teacher() -> tuple[AppTest, str]:
    teacher = _ok(_app())
    _button(teacher, "class_start")
    seat = teacher.session_state["class"]
    assert seat.teacher and cl.is_teacher(seat.code, seat.key)
    shown = "".join(m.value for m in [*teacher.markdown, *teacher.caption, *teacher.code])
    assert seat.key not in shown  # never shown: only the teacher's browser keeps it, in a cookie
    assert any(f"bfe_teacher={seat.code}.{seat.key};" in h.proto.body for h in teacher.get("html"))
    assert seat.code in markdown(teacher)
    return teacher, seat.code


def test_a_student_follows_the_teacher_and_the_class_predicts_then_sees_the_reveal() -> None:
    teacher, code = _teacher()
    student = _ok(_app(**{"class": code.lower()}))  # the join link, typed in lower case
    me = student.session_state["class"]
    assert not me.teacher and me.following and me.member
    # the teacher opens the calculator's Training memory tab (only the open tab is drawn) with a batch of its
    # choosing: the student's page goes there, on the same tab, with it
    teacher.switch_page("views/calculator.py").run()
    assert "sz_batch" not in {w.key for w in teacher.number_input}  # the first tab is open: memory is not drawn
    teacher.query_params["sz_tab"] = "Training memory"  # a click on the tab: the browser puts it in the address
    teacher.run()
    teacher.number_input(key="sz_batch").set_value(64).run()
    _ok(teacher)
    _ok(student.run())
    assert student.session_state["sz_batch"] == 64 and student.query_params["class"] == code
    assert student.session_state["sz_tab"] == "Training memory" and "sz_batch" in {w.key for w in student.number_input}
    assert student.query_params["sz_batch"] == "64"
    # the teacher asks; the answer is hidden on both pages while the class answers
    _button(teacher, "sz_fit_q_ask")
    assert "per GPU** for batch" not in markdown(teacher)
    _ok(student.run())
    assert "per GPU** for batch" not in markdown(student)
    student.radio(key="sz_fit_q_answer").set_value("does not fit").run()
    _button(student, "sz_fit_q_send")
    assert "Your answer: does not fit" in markdown(student)
    _ok(teacher.run())
    assert next(m.value for m in teacher.metric if m.label == "Answers so far") == "1"
    _button(teacher, "sz_fit_q_reveal")
    assert "per GPU** for batch" in markdown(teacher)  # revealed: the calculator's answer is back
    chart = teacher.get("plotly_chart")
    assert any('"does not fit"' in c.proto.spec for c in chart)
    _ok(student.run())
    assert "per GPU** for batch" in markdown(student)
    # the student explores on its own, then rejoins with one click
    student.toggle(key="class_follow").set_value(False).run()
    teacher.switch_page("views/scaling.py").run()
    _ok(teacher)
    _ok(student.run())
    assert "sz_batch" in student.session_state and "sc_law" not in student.query_params
    student.toggle(key="class_follow").set_value(True).run()
    _ok(student)
    assert "Scaling" in markdown(student) or any("Scaling" in t.value for t in student.title)
    # the teacher ends the class: the student is told, and the class is gone with its answers
    _button(teacher, "class_end")
    _ok(student.run())
    assert "class" not in student.session_state and "no class" in "".join(e.value for e in student.error).lower()
    assert cl.stats() == {"classes": 0, "members": 0, "questions": 0, "answers": 0}


def test_fill_mask_reveal_shows_the_class_beside_the_model() -> None:
    teacher, code = _teacher()
    student = _ok(_app(**{"class": code}))
    teacher.switch_page("views/objectives.py").run()
    _ok(teacher)
    _button(teacher, "ob_fill_q_ask")
    _ok(student.run())
    assert not [c for c in student.get("plotly_chart") if c.proto.id and "ob_bar" in str(c.key or "")]
    student.text_input(key="ob_fill_q_answer").set_value("<b>Paris</b>").run()
    _button(student, "ob_fill_q_send")
    _button(teacher, "ob_fill_q_reveal")
    specs = [c.proto.spec for c in teacher.get("plotly_chart")]
    reveal = [s for s in specs if "class (1 answer)" in s]
    labels = json.loads(reveal[0])["data"][0]["y"]
    assert "&lt;b&gt;paris&lt;/b&gt;" in labels and "<b>paris</b>" not in labels  # shown as typed, never as markup
    model = json.loads(reveal[0])["data"][1]
    assert model["name"] == "bert-base-uncased" and sum(model["x"]) > 0  # the model's top-k beside the class


def test_a_follow_that_changed_page_draws_the_page_once_more(monkeypatch) -> None:
    """A busy browser can clear a page that a follow has just drawn (it takes the poll's next run for a change of page):
    after a follow that changed page, the poll's first run of its own reruns the page once, and only once."""
    import app.ui.classroom as classroom_ui

    teacher, code = _teacher()
    student = _ok(_app(**{"class": code}))
    teacher.switch_page("views/scaling.py").run()
    _ok(student.run())
    me = student.session_state["class"]
    assert me.redraw  # the follow changed page: the page is due one more run
    runs = []
    monkeypatch.setattr(classroom_ui, "_on_its_own", lambda: runs.append(1) or True)  # as the poll's timer runs it
    _ok(student.run())
    assert not student.session_state["class"].redraw and len(runs) == 1  # one more run of the page, then no more
    _ok(student.run())
    assert len(runs) == 1


def test_bad_codes_get_a_message_and_no_seat() -> None:
    for code in ("NOPE42", "'; DROP TABLE bfe_classes; --", "x" * 500):
        at = _ok(_app(**{"class": code}))
        assert "class" not in at.session_state
        assert any("class" in e.value.lower() for e in at.error)
    at = _ok(_app())
    at.text_input(key="class_code_typed").set_value("ZZZZZZ").run()
    _button(at, "class_join")
    assert "class" not in at.session_state and any("no class ZZZZZZ" in e.value for e in at.error)


def test_a_teacher_key_is_needed_to_lead() -> None:
    _, code = _teacher()
    intruder = _ok(_app(**{"class": code}))
    intruder.session_state["class"].key = "guessed"  # a student who forges a key in its own session
    intruder.switch_page("views/attention.py").run()
    _ok(intruder)
    assert cl.class_state(code).page == ""  # the class did not move
