"""GLUE results database: published results with their sources, compared, checked, extended and exported. No torch."""

from typing import Any, NamedTuple

import pandas as pd
import streamlit as st

from analysis import glue_plots
from analysis.safe_text import csv_bytes
from app import ui
from core.errors import ExplorerError, InvalidResult
from services import results

GLUE8 = ["MNLI", "QNLI", "QQP", "RTE", "SST-2", "MRPC", "CoLA", "STS-B"]
DEFAULT_MODELS = ["BERT-base", "BERT-large", "RoBERTa-large", "XLNet-large", "ALBERT-base", "ALBERT-xxlarge", "DistilBERT",
                  "ERNIE 2.0-large", "Megatron-3.9B"]
DEFAULTS = {"gl_split": "dev", "gl_setting": "single", "gl_tasks": GLUE8, "gl_models": DEFAULT_MODELS, "gl_variants": False,
            "gl_collapse": True, "gl_cols": [], "gl_base": "BERT-base", "gl_size_col": "MNLI m", "gl_view": "Table", "gl_radar_each": False}
VIEWS = ["Table", "Charts", "Bigger is better?", "Score check", "Add results", "Tasks & sources"]


# Keyed by the data's version: a result another process (another replica) added shows on the next rerun.
@st.cache_data(ttl=600, max_entries=4, show_spinner="Opening the results database…")
def load_all(url: str, version: tuple) -> pd.DataFrame:
    return results.frame(url)


@st.cache_data(ttl=600, max_entries=16, show_spinner=False)
def reference(url: str, kind: str, version: tuple) -> pd.DataFrame:
    return results.catalog(url, kind)


def written() -> None:
    """After a write: drop the cached frames so every view shows the new rows."""
    load_all.clear()
    reference.clear()


st.title("GLUE results database")
st.markdown("#### Published GLUE, SQuAD and RACE results, each with its paper, table and split: compare, check, add your own")
try:
    url = results.default_url()
    version = results.version(url)
    df_all = load_all(url, version)
except ExplorerError as err:
    ui.show_error(err)
    st.stop()

tasks_all = list(dict.fromkeys(df_all["task"]))
models_all = list(dict.fromkeys(df_all["model"]))
ignored = ui.restore_url_state(DEFAULTS, {"gl_split": ["dev", "test", "both"], "gl_setting": ["single", "ensemble", "both"],
                                          "gl_tasks": tasks_all, "gl_models": models_all, "gl_view": VIEWS})
ui.warn_ignored(ignored, "gl_")
published = df_all[df_all["origin"] == "seed"]
added = len(df_all) - len(published)
st.caption(f"{len(published):,} published results from {published['source'].nunique()} papers and leaderboards, transcribed from the "
           f"lecture slides{f', and {added:,} added by users' if added else ''}; hover a value for its source. Database: "
           f"{results.describe(url, ui.local_viewer())} · seed data {results.seed_version()}.")

class Compared(NamedTuple):
    """What the comparison views draw: the compared table, the rows it came from, their sources, the filters."""

    comp: Any
    picked: pd.DataFrame
    sources: tuple[str, ...]
    split: str
    setting: str


def split_filter() -> tuple[str, Any]:
    """The split the comparison views and the score check show, and the column beside its control."""
    c1, c2 = st.columns(2)
    c1.segmented_control("Split", ["dev", "test", "both"], key="gl_split", help="Development or test set (test = GLUE server/leaderboard).")
    return st.session_state["gl_split"] or "dev", c2


def filtered(split: str, c2: Any) -> tuple[pd.DataFrame, str]:
    """The results the filters keep (models, tasks, variants), and the single/ensemble setting (its control in ``c2``)."""
    c2.segmented_control("Models", ["single", "ensemble", "both"], key="gl_setting", format_func=lambda s: {"single": "single models",
                         "ensemble": "ensembles", "both": "both"}[s])
    c3, c4 = st.columns(2)
    c3.toggle("Ablation variants", key="gl_variants", help="Include the papers' ablations (ALBERT's E and sharing, RoBERTa's inputs…).")
    c4.toggle("One row per model", key="gl_collapse",
              help="On: when several papers report the same number, the model's own paper wins, then the newest. Off: one row per paper table.")
    setting = st.session_state["gl_setting"] or "both"
    view = results.select(df_all, split=split, setting=setting, variants=st.session_state["gl_variants"])
    c1, c2 = st.columns(2)
    c1.multiselect("Tasks", tasks_all, key="gl_tasks", help="GLUE's eight scored tasks are preselected; add WNLI, AX, SQuAD, RACE…")
    with_results = set(view[view["task"].isin(st.session_state["gl_tasks"])]["model"])  # once, not once per model
    model_opts = [m for m in models_all if m in with_results]
    kept = [m for m in st.session_state["gl_models"] if m in model_opts]
    st.session_state["gl_models"] = kept
    c2.multiselect(f"Models ({len(model_opts)} with results here)", list(dict.fromkeys(kept + model_opts)), key="gl_models")
    return view[view["task"].isin(st.session_state["gl_tasks"]) & view["model"].isin(st.session_state["gl_models"])], setting


def compared(split: str, beside: Any) -> Compared | None:
    """The comparison the filters and the chosen columns give; None (with a message) where nothing is left."""
    view, setting = filtered(split, beside)
    if view.empty:
        st.info("No results match: try the other split, both single models and ensembles, or more tasks and models.", icon=":material/filter_alt_off:")
        return None
    options = results.column_options(view)
    defaults = set(results.default_columns(view))  # once, not once per column
    default_cols = [lbl for lbl, tm in options.items() if tm in defaults]
    chosen = [c for c in st.session_state["gl_cols"] if c in options] or default_cols
    cols = st.multiselect("Columns (task and metric)", list(options), default=chosen, key="gl_cols_widget")
    st.session_state["gl_cols"] = cols if cols != default_cols else []
    keep = {options[c] for c in cols}
    picked = view[[tm in keep for tm in zip(view["task"], view["metric"], strict=True)]]
    comp = results.compare(picked, collapse=st.session_state["gl_collapse"], order=[options[c] for c in cols])
    if comp.empty:
        st.info("Pick at least one column to compare.", icon=":material/table:")
        return None
    sources = tuple(dict.fromkeys(f"{c}, {t or 'no table'}, {sp}" for c, t, sp in
                                  zip(picked["citation"], picked["table"], picked["split"], strict=True)))
    return Compared(comp, picked, sources, split, setting)


def table_view(c: Compared) -> None:
    """The comparison as a table, with its downloads."""
    comp = c.comp
    ui.main_result().html(glue_plots.to_html(comp))
    st.caption("★ best value in its column (↓: lower is better) · hover a value for its paper, table, split and notes · "
               "'–' not reported in that table.")
    caption = f"{', '.join(comp.values.columns)} ({c.split}, {c.setting} models)"
    d1, d2, d3, d4 = st.columns(4)
    ui.download(d1, "Table (CSV)", lambda: csv_bytes(comp.values, index=True), "glue_comparison.csv", "text/csv")
    ui.download(d2, "Markdown", lambda: glue_plots.to_markdown(comp).encode(), "glue_comparison.md", "text/markdown")
    ui.download(d3, "LaTeX", lambda: glue_plots.to_latex(comp, caption=caption).encode(), "glue_comparison.tex", "application/x-tex")
    ui.download(d4, "Rows with sources (CSV)", lambda: results.export_rows(c.picked), "glue_results.csv", "text/csv",
                help="One row per number with its source; the same format the import accepts.")
    ui.table_to_pack(comp.values, "gl_table", title=f"GLUE results: {caption}", caption=caption, sources=c.sources)


def charts_view(c: Compared) -> None:
    """The comparison as grouped bars, radars and differences from a baseline."""
    comp, where = c.comp, f"{c.split}, {c.setting} models"
    ui.chart(glue_plots.grouped_bars(comp), "gl_bars", main=True, title="GLUE results side by side", caption=where, sources=c.sources)
    st.toggle("One radar per model", key="gl_radar_each")
    ui.chart(glue_plots.radar(comp, separate=st.session_state["gl_radar_each"]), "gl_radar", title="GLUE results as radars",
             caption=where, sources=c.sources)
    rows = list(comp.values.index)
    st.session_state["gl_base"] = st.session_state["gl_base"] if st.session_state["gl_base"] in rows else rows[0]
    st.selectbox("Baseline for the differences", rows, key="gl_base")
    ui.chart(glue_plots.delta_heatmap(results.deltas(comp, st.session_state["gl_base"]), st.session_state["gl_base"]), "gl_delta",
             title=f"Differences from {st.session_state['gl_base']}", caption=where, sources=c.sources)


def size_view(c: Compared) -> None:
    """One score against the models' parameter counts."""
    comp, score = c.comp, "gl_size_col"
    cols = list(comp.values.columns)
    if st.session_state[score] not in cols:
        st.session_state[score] = max(cols, key=lambda col: comp.values[col].notna().sum())
    st.selectbox("Score", cols, key=score)
    pts = results.size_points(comp, st.session_state[score])
    if len(pts) < 2:
        st.info("Fewer than two of these models have both a parameter count and this score; pick another column or more models.")
        return
    ui.chart(glue_plots.score_vs_size(pts, st.session_state[score]), "gl_size",
             title=f"Bigger is better? {st.session_state[score]} against parameters",
             caption=f"{c.split}, {c.setting} models", sources=c.sources)
    st.markdown("Within a family, bigger usually scores higher (BERT-base → BERT-large, Megatron 336M → 3.9B). The counter-"
                "examples: **DistilBERT** keeps most of BERT-base's score with 40% fewer parameters, and **ALBERT** shares "
                "one layer's weights across all layers, so ALBERT-xxlarge (235M) beats BERT-large (334M) — parameters are not "
                "compute, and ALBERT-xxlarge is the slower of the two.")
    missing = [r for r in comp.values.index if r not in set(pts["label"])]
    if missing:
        st.caption("Not plotted (no parameter count or no value): " + ", ".join(missing))


def check_view(split: str) -> None:
    """Each reported aggregate beside the one recomputed from the same table's cells."""
    st.markdown("Each reported aggregate beside the one recomputed from the same table's cells, the way that paper computes it. "
                "**within rounding**: off by at most one unit of the last digit, which rounded cells allow; **differs**: more than that; "
                "**cannot recompute**: the table does not print every metric the score needs (leaderboard tables print one number per task).")
    chk = results.score_check(df_all if split == "both" else df_all[df_all["split"] == split])
    counts = chk["status"].value_counts()
    for col, name in zip(st.columns(4), ["match", "within rounding", "differs", "cannot recompute"], strict=True):
        col.metric(name, int(counts.get(name, 0)))
    st.dataframe(chk, hide_index=True, width="stretch",
                 column_config={"reported": st.column_config.NumberColumn(format="%.2f"),
                                "recomputed": st.column_config.NumberColumn(format="%.2f"),
                                "difference": st.column_config.NumberColumn(format="%+.2f"),
                                "glue_official": st.column_config.NumberColumn("GLUE score (official formula)", format="%.2f"),
                                "glue_without_wnli": st.column_config.NumberColumn("without WNLI", format="%.2f")})
    with st.expander("How each paper aggregates"):
        for conv in results.CONVENTIONS.values():
            st.markdown(f"- **{conv.label}**: {conv.description}.")
    ui.download_buttons(chk, "glue_score_check", key="gl_chk")


def add_form() -> None:
    """One result typed in, validated and stored as the user's."""
    metrics_ref = reference(url, "metrics", version)
    a1, a2 = st.columns(2)
    task = a1.selectbox("Task", list(dict.fromkeys(metrics_ref["task"])), key="gl_add_task")
    metrics = metrics_ref[metrics_ref["task"] == task]
    metric = a2.selectbox("Metric", list(metrics["metric"]), key="gl_add_metric",
                          format_func=lambda k: f"{k} — {metrics.set_index('metric').loc[k, 'name']}")
    with st.form("gl_add", clear_on_submit=False):
        f1, f2, f3 = st.columns(3)
        model = f1.selectbox("Model", models_all, index=None, accept_new_options=True, key="gl_add_model",
                             placeholder="pick one, or type a new name")
        variant = f2.text_input("Variant (optional)", placeholder="e.g. 1.5M steps", max_chars=results.TEXT_LIMITS["variant"], key="gl_add_variant")
        value = f3.text_input("Value", placeholder="e.g. 84.6 (percent)", key="gl_add_value")
        f4, f5, f6 = st.columns(3)
        split_in = f4.selectbox("Split", list(results.RESULT_SPLITS), key="gl_add_split")
        setting_in = f5.selectbox("Single or ensemble", list(results.RESULT_SETTINGS), key="gl_add_setting")
        params_in = f6.text_input("Parameters (new models)", placeholder="e.g. 110000000", key="gl_add_params")
        f7, f8, f9 = st.columns(3)
        sources = reference(url, "sources", version)
        source = f7.selectbox("Source", list(sources.loc[sources["origin"] == "user", "title"]), index=None, accept_new_options=True,
                              key="gl_add_source", placeholder="type 'Author et al. 2024, …'",
                              help="Cite where the number comes from, with a year. The built-in sources are the slides' own "
                                   "data: a result you add is always marked as added by a user.")
        table_in = f8.text_input("Table", placeholder="e.g. Table 2", max_chars=results.TEXT_LIMITS["table"], key="gl_add_table")
        snapshot = f9.text_input("Leaderboard date (optional)", placeholder="YYYY-MM-DD", key="gl_add_snapshot")
        note = st.text_input("Note (optional)", max_chars=results.TEXT_LIMITS["note"], key="gl_add_note")
        submitted = st.form_submit_button("Add result", type="primary", key="gl_add_submit")
    if submitted:
        try:
            new = results.add(url, results.NewResult(model=model or "", variant=variant, task=task, metric=metric, split=split_in,
                                                     setting=setting_in, value=value, source=source or "", table=table_in,
                                                     snapshot=snapshot, note=note, parameters=params_in))
        except ExplorerError as err:
            ui.show_error(err)
            return
        written()
        st.success(f"Saved (id {new.id}): {model} · {task} {metric} · {split_in} = {value}.", icon=":material/check_circle:")
        if new.warning:
            st.warning(new.warning, icon=":material/percent:")


def import_csv() -> None:
    """A CSV of results, checked whole before any row is stored."""
    st.markdown(f"**Import a CSV** — columns `{'`, `'.join(results.IMPORT_COLUMNS)}` (optional: `{'`, `'.join(results.OPTIONAL_COLUMNS)}`); "
                f"at most {results.MAX_IMPORT_ROWS:,} rows and {results.MAX_IMPORT_BYTES // 1_000_000} MB. All rows are checked first; "
                "if any fails, nothing is imported and the problems are listed by line.")
    upload = st.file_uploader("CSV file", type=["csv"], key="gl_upload", max_upload_size=max(1, results.MAX_IMPORT_BYTES // 1_000_000))
    if upload is not None and st.button("Import", key="gl_import"):
        try:
            report = results.import_rows(url, upload.getvalue())
            written()
            st.success(f"Imported {report.rows} result(s).", icon=":material/check_circle:")
        except InvalidResult as err:
            ui.show_error(err)
            if err.errors:
                st.table(pd.DataFrame(err.errors[:50], columns=["line", "problem"]).set_index("line"))
                if len(err.errors) > 50:
                    st.caption(f"… and {len(err.errors) - 50} more.")
        except ExplorerError as err:
            ui.show_error(err)
    ui.download(st, "Example file (3 rows)", results.export_rows(df_all.head(3)), "results_template.csv", "text/csv")


def users_results() -> None:
    """The results users added, each deletable."""
    mine = df_all[df_all["origin"] == "user"]
    if mine.empty:
        return
    st.markdown(f"**Results added by users** ({len(mine)})")
    st.dataframe(mine[["id", "model", "variant", "task", "metric", "split", "setting", "value", "citation", "table", "note"]],
                 hide_index=True, width="stretch")
    d1, d2 = st.columns([1, 3])
    gone = d1.selectbox("Delete result id", list(mine["id"]), key="gl_del_id")
    if d2.button("Delete", key="gl_del"):
        try:
            results.delete(url, int(gone))
        except ExplorerError as err:
            ui.show_error(err)
            return
        written()
        st.rerun()


def add_view() -> None:
    st.markdown("Add a result from a paper or your own run. It is validated (known task and metric, value in range, a source) and "
                "stored with `origin = user`; upgrades of the built-in data never touch it.")
    add_form()
    st.divider()
    import_csv()
    users_results()


def tasks_view() -> None:
    """The tasks, the metrics' valid ranges and the sources, as the database holds them."""
    tasks_tbl = reference(url, "tasks", version)
    st.markdown("**The tasks** (the GLUE table from the slides, 001; other tasks from their papers)")
    st.dataframe(tasks_tbl[["key", "name", "benchmark", "kind", "train_size", "test_size", "domain", "metrics", "source"]],
                 hide_index=True, width="stretch")
    st.markdown("**Metrics and their valid ranges** (a value outside is refused)")
    st.dataframe(reference(url, "metrics", version), hide_index=True, width="stretch")
    st.markdown("**Sources**")
    src = reference(url, "sources", version)
    counts = df_all.groupby("source").size()
    src = src.assign(results=src["key"].map(counts).fillna(0).astype(int),
                     link=[f"https://arxiv.org/abs/{a}" if a else u for a, u in zip(src["arxiv"], src["url"], strict=True)])
    st.dataframe(src[["key", "title", "authors", "year published", "first arXiv", "venue", "results", "link", "note"]],
                 hide_index=True, width="stretch", column_config={"link": st.column_config.LinkColumn()})


#: The views of one comparison (Table, Charts, Bigger is better?), and the others.
COMPARISON_VIEWS = {"Table": table_view, "Charts": charts_view, "Bigger is better?": size_view}
OTHER_VIEWS = {"Add results": add_view, "Tasks & sources": tasks_view}

st.segmented_control("View", VIEWS, key="gl_view", label_visibility="collapsed")
current = st.session_state["gl_view"] or "Table"
if current in COMPARISON_VIEWS:
    shown = compared(*split_filter())
    if shown is not None:
        COMPARISON_VIEWS[current](shown)
elif current == "Score check":
    check_view(split_filter()[0])
else:
    OTHER_VIEWS[current]()

ui.save_url_state(DEFAULTS)
