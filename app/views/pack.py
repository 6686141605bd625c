"""Presentation pack: the charts collected with "Add to pack", in order, downloaded as slides, a handout or a zip."""

import secrets

import streamlit as st

from app import ui
from services import pack as packs

st.title("Presentation pack")
st.markdown("#### What you collected while exploring, with captions and sources, ready for slides")

pack: list = st.session_state.setdefault("pack", [])


def open_saved(token: str) -> None:
    """Replace this session's pack with a saved one (the link's)."""
    with ui.friendly_errors():
        title, items = packs.open_saved(token)
        pack[:] = items
        st.session_state["pack_deck_title"] = title
        st.session_state["pack_opened"] = token
        _forget_titles()


def _forget_titles() -> None:
    """The title boxes are keyed by position: after a move or removal they start again from the items."""
    for k in [k for k in st.session_state if str(k).startswith("pack_title_")]:
        del st.session_state[k]
    st.session_state.pop("pack_files", None)


saved = st.query_params.get("saved")
if saved and st.session_state.get("pack_opened") != saved:
    if not pack:
        open_saved(saved)
    else:
        st.info(f"This link holds a saved pack; yours has {len(pack)} item(s).", icon=":material/link:")
        st.button("Open the saved pack instead of mine", key="pack_open_saved", on_click=open_saved, args=(saved,),
                  icon=":material/folder_open:")
if not pack:
    ui.main_result().info("The pack is empty. On any page, **Add to pack** under a chart collects it here with its caption and "
            "sources; it stays while this browser tab is open.", icon=":material/playlist_add:")
    st.stop()


def move(i: int, by: int) -> None:
    j = i + by
    if 0 <= j < len(pack):
        pack[i], pack[j] = pack[j], pack[i]
        _forget_titles()


def remove(i: int) -> None:
    if 0 <= i < len(pack):
        pack.pop(i)
        _forget_titles()


def retitle(i: int) -> None:
    from dataclasses import replace

    new = (st.session_state.get(f"pack_title_{i}") or "").strip()[: packs.MAX_TITLE_CHARS]
    if new and 0 <= i < len(pack):
        pack[i] = replace(pack[i], title=new)
        st.session_state.pop("pack_files", None)


st.caption(f"{len(pack)} item(s) of at most {packs.MAX_ITEMS}. Retitle, reorder or remove them; the downloads follow.")
with ui.main_result():  # the items: the page's main result
    for i, item in enumerate(pack):
        with st.container(border=True):
            c = st.columns([7, 2, 2, 2])
            c[0].text_input("Title", item.title, key=f"pack_title_{i}", on_change=retitle, args=(i,), max_chars=packs.MAX_TITLE_CHARS,
                            label_visibility="collapsed")
            c[1].button("Up", key=f"pack_up_{i}", on_click=move, args=(i, -1), disabled=i == 0, icon=":material/arrow_upward:")
            c[2].button("Down", key=f"pack_down_{i}", on_click=move, args=(i, 1), disabled=i == len(pack) - 1,
                        icon=":material/arrow_downward:")
            c[3].button("Remove", key=f"pack_rm_{i}", on_click=remove, args=(i,), icon=":material/delete:")
            kind = "chart" if item.figure is not None else "table"
            st.caption(f"{kind} · {item.caption or 'no caption'}")
            st.caption(packs.source_line(item) + (f" · [reopen]({item.link})" if item.link else ""))


def save_link() -> None:
    """Store the pack in the database and put its token in the URL: the address bar becomes the link."""
    try:
        # A random name for this browser session: the rate limit and the eviction order count saves per session.
        saver = st.session_state.setdefault("pack_saver", secrets.token_hex(8))
        token = packs.save(pack, st.session_state.get("pack_deck_title") or "BERT Family Explorer", saver)
    except Exception as err:  # shown by the page below, like every other error
        st.session_state["pack_save_error"] = err
        return
    st.session_state["pack_opened"] = token
    st.query_params["saved"] = token


st.subheader("Save as a link")
st.button("Save the pack as a link", key="pack_save", on_click=save_link, icon=":material/link:",
          help="Stores this pack on the server; the link reopens it in any browser (this one's pack stays as it is).")
if err := st.session_state.pop("pack_save_error", None):
    ui.show_error(err)
elif (token := st.query_params.get("saved")) and st.session_state.get("pack_opened") == token:
    base = (ui.context_url() or "").split("?", 1)[0]
    st.code(f"{base}?saved={token}", language=None)
    st.caption("Anyone with this link gets a copy of the pack as it was saved (later changes here need a new link).")

st.subheader("Download")
st.session_state.setdefault("pack_deck_title", "BERT Family Explorer")
title = st.text_input("Title of the deck and handout", max_chars=packs.MAX_TITLE_CHARS, key="pack_deck_title")
files = st.session_state.get("pack_files")
if files is None or files[0] != (title, tuple(pack)):
    if packs.chromium_path() is None and any(i.figure is not None for i in pack):
        st.info("The charts need Chromium on the server to become images (`apt-get install -y chromium`); "
                "each chart's camera icon still saves a PNG from your browser.", icon=":material/info:")
    elif st.button("Build the deck, handout and zip", type="primary", icon=":material/slideshow:"):
        built = False
        with ui.friendly_errors(), st.spinner(f"Rendering {len(pack)} item(s)…"), ui.slot_lent():  # Chromium draws
            st.session_state["pack_files"] = ((title, tuple(pack)), packs.slide_deck(pack, title),
                                              packs.handout_html(pack, title).encode(), packs.pack_zip(pack, title))
            built = True
        if built:  # outside the lent slot: a rerun ends this run at once
            st.rerun()
else:
    d1, d2, d3 = st.columns(3)
    ui.download(d1, "PowerPoint (.pptx)", files[1], "presentation-pack.pptx",
                "application/vnd.openxmlformats-officedocument.presentationml.presentation")
    ui.download(d2, "Handout (offline HTML)", files[2], "presentation-pack.html", "text/html")
    ui.download(d3, "Everything (.zip)", files[3], "presentation-pack.zip", "application/zip")
    st.caption("The deck: a title slide, one slide per item with its image or table, caption and source line, and a "
               "sources slide. The handout needs nothing from the internet.")
