"""A page drawn by Streamlit's AppTest, as a new browser session would draw it, and the text it shows."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.helpers import ENTRY


def run(page: str | None = None, **query: str) -> AppTest:
    """Home drawn with ``query`` in the URL, then ``page`` if given; fails on an exception."""
    at = AppTest.from_file(ENTRY, default_timeout=60)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def markdown(at: AppTest) -> str:
    """Every markdown, caption and HTML text the page shows, as one string."""
    return "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.caption) + "\n".join(
        h.proto.body for h in at.get("html"))


def calc_page(**query: str) -> AppTest:
    """The calculator drawn with ``query`` in the URL."""
    return run("views/calculator.py", **query)


def metric(at: AppTest, label: str) -> str:
    """The value of the metric labelled ``label``."""
    return next(m.value for m in at.metric if m.label == label)
