"""Scaling-law lab: fit, compare and extrapolate power laws on published points or your own. No torch."""

import json
import math
from typing import Any

import pandas as pd
import streamlit as st

from analysis import scaling_plots as plots
from analysis.safe_text import csv_bytes
from app import ui
from core.errors import ExplorerError
from services import scaling

MAX_UPLOAD_BYTES, MAX_ROWS = scaling.MAX_CSV_BYTES, scaling.MAX_CSV_ROWS
DEFAULTS = {"sc_src": "built-in", "sc_ds": "bert_size_ablation", "sc_x": "", "sc_y": "", "sc_x2": "", "sc_law": "power",
            "sc_transform": "as is", "sc_extra": 0.0, "sc_boot": 200, "sc_budget": 5.76e23, "sc_lab": ""}
ALLOWED = {"sc_src": ["built-in", "upload", "lab"], "sc_lab": lambda v: len(v) <= 100, "sc_ds": list(scaling.DATASETS), "sc_law": list(scaling.LAWS),
           "sc_transform": list(scaling.TRANSFORMS), "sc_boot": scaling.BOUNDS["bootstrap"],
           "sc_extra": scaling.BOUNDS["extrapolate"], "sc_budget": scaling.BOUNDS["compute"]}


@st.cache_data(show_spinner="Fitting…", max_entries=64)
def run_fit(table: pd.DataFrame, x: str, y: str, law: str, transform: str, x2: str, boot: int) -> scaling.TableFit:
    return scaling.fit_table(table, x, y, law, transform, x2, boot)


@st.cache_data(show_spinner=False)
def builtin(key: str) -> pd.DataFrame:
    return scaling.dataset(key)


def pick(key: str, options: list[str], default: str) -> None:
    """Keep a column choice valid when the table changes."""
    if st.session_state.get(key) not in options:
        st.session_state[key] = default if default in options else options[0]


ignored = ui.restore_url_state(DEFAULTS, ALLOWED)
st.title("Scaling laws")
st.markdown("#### Put points on log-log axes, fit a law, read its exponent with an error bar, extrapolate")
ui.warn_ignored(ignored, "sc_")

# ------------------------------------------------------------------------------------ the data
src = st.segmented_control("Data", ["built-in", "upload", "lab"], key="sc_src",
                           format_func={"built-in": "Built-in data set", "upload": "Your CSV", "lab": "Your lab runs"}.get) or "built-in"
def stop_here() -> None:
    ui.save_url_state(DEFAULTS)
    st.stop()


def builtin_data() -> tuple[pd.DataFrame, str, tuple[str, str, str]]:
    """A data set from the slides: (table, its editor's key, the default x, y and law)."""
    st.selectbox("Data set (from the lecture slides)", list(scaling.DATASETS), key="sc_ds", format_func=lambda k: scaling.DATASETS[k].title)
    ds = scaling.DATASETS[st.session_state["sc_ds"]]
    st.caption(ds.description)
    return builtin(ds.key), f"sc_edit_{ds.key}", (ds.x, ds.y, ds.law)


def lab_data() -> tuple[pd.DataFrame, str, tuple[str, str, str]]:
    """A finished lab experiment's final losses; stops with a way to the lab where there is none."""
    try:
        frame, groups = scaling.lab_experiments()
    except ExplorerError as err:
        ui.show_error(err)
        stop_here()
    if not groups:
        st.info("No finished lab runs yet. On the Pre-training lab page, start “Scaling: 4 sizes, one budget”; its final "
                "losses land here as a data set.")
        st.page_link("views/lab.py", label="Open the pre-training lab", icon=":material/model_training:")
        stop_here()
    if st.session_state["sc_lab"] not in groups:
        st.session_state["sc_lab"] = groups[0]
    st.selectbox("Lab experiment (finished runs)", groups, key="sc_lab")
    st.caption("Trained on this server. N counts non-embedding parameters, as Kaplan et al. (2020) do; D is the tokens "
               "each run saw; the loss is the held-out masked-LM loss (WordNet glosses, 2% held out).")
    return (scaling.lab_table(frame, st.session_state["sc_lab"]), f"sc_edit_lab_{st.session_state['sc_lab']}",
            ("N (non-embedding)", "held-out loss", "power"))


def uploaded_data() -> tuple[pd.DataFrame, str, tuple[str, str, str]]:
    """The user's CSV, read and checked; stops with a message until there is one."""
    upload = st.file_uploader(f"CSV with a header row (at most {MAX_ROWS:,} rows, {MAX_UPLOAD_BYTES // 2**20} MB)", type=["csv"],
                              key="sc_upload")
    if upload is None:
        st.info("Upload a CSV with at least two numeric columns (for example parameters and loss), or pick a built-in data set.")
        stop_here()
    try:
        table = scaling.upload(upload.getvalue())
    except ExplorerError as err:
        ui.show_error(err)
        stop_here()
    return table, f"sc_edit_upload_{upload.file_id}", ("", "", "power")


table, editor_key, defaults = {"built-in": builtin_data, "lab": lab_data, "upload": uploaded_data}[src]()

with st.expander("The table (edit cells, add or delete rows; the fit follows)", expanded=src == "upload"):
    data = st.data_editor(table, key=editor_key, num_rows="dynamic", width="stretch", hide_index=True)
    st.caption("Edits stay in this browser tab; a shared link restores the data set and choices, not your edits — download the CSV to keep them.")

numeric = scaling.numeric_columns(data)
if len(numeric) < 2:
    st.error("**The table needs at least two columns that are numbers on every row.** "
             f"Numeric now: {', '.join(numeric) or 'none'}. Fix the cells with text or leave them out.", icon=":material/error:")
    ui.save_url_state(DEFAULTS)
    st.stop()

# ------------------------------------------------------------------------------------ the law
c = st.columns([2, 2, 3, 2])
pick("sc_x", numeric, defaults[0])
pick("sc_y", numeric, defaults[1] if defaults[1] else numeric[-1])
c[0].selectbox("x", numeric, key="sc_x")
c[1].selectbox("y", numeric, key="sc_y")
c[2].selectbox("Law", list(scaling.LAWS), key="sc_law", format_func=lambda k: scaling.LAWS[k].label)
c[3].selectbox("y as", list(scaling.TRANSFORMS), key="sc_transform",
               help="Accuracy rises with scale; its error 100 − y falls like a loss and fits a power law.")
law = st.session_state["sc_law"]
two_variables = scaling.LAWS[law].variables == 2  # L(N, D): D is its second column
if two_variables:
    pick("sc_x2", numeric, numeric[1] if numeric[0] == st.session_state["sc_x"] else numeric[0])
    st.selectbox("Second variable D (tokens); x is N (parameters)", numeric, key="sc_x2")
c = st.columns([2, 2, 3])
ui.bounded_number(c[0], "Extrapolate to x", "sc_extra", ALLOWED["sc_extra"], format="%.4g",
                  help="0: ten times the largest x. The point and its band are drawn on the chart.")
ui.bounded_number(c[1], "Bootstrap resamples", "sc_boot", ALLOWED["sc_boot"], step=50, help="For standard errors and the band; 0 is fastest.")

state = st.session_state
try:
    # D only where the law has it: another D in the link (or left from an earlier law) is not a new fit
    fitted = run_fit(data, state["sc_x"], state["sc_y"], law, state["sc_transform"], state["sc_x2"] if two_variables else "",
                     int(state["sc_boot"]))
    x_to, at_x_to = scaling.read_at(fitted.fit, float(state["sc_extra"]))
except ExplorerError as err:
    ui.show_error(err)
    fitted = None

def fit_charts(fitted, x_to: float) -> Any:
    """The fit and its residuals, drawn on the left; the figure the HTML download holds."""
    f, left = fitted.fit, st.columns([3, 2])
    sources = tuple(sorted(set(data["source"].dropna()))) if "source" in data else ()
    residuals = plots.residual_figure(f, state["sc_x"])
    if f.x.ndim == 1:
        fig = plots.fit_figure(f, state["sc_x"], fitted.y_label, x_to, labels=fitted.labels)
        ui.chart(fig, "sc_plot", where=left[0], main=True, title=f"Scaling fit: {f.formula}",
                 caption=f"{state['sc_y']} against {state['sc_x']}, {len(f.y)} points.", sources=sources)
    else:
        fig = residuals  # a two-variable law has no single curve: its residuals are the picture (and the HTML download)
        left[0].markdown("**Residuals against N** (a two-variable law has no single curve to draw)")
    ui.chart(residuals, "sc_resid", where=left[0], main=f.x.ndim != 1, title=f"Residuals of {f.formula}",
             caption=f"{state['sc_y']} against {state['sc_x']}, {len(f.y)} points.", sources=sources)
    with left[1]:
        fit_numbers(fitted, x_to, fig)
    return fig


def fit_numbers(fitted, x_to: float, fig: Any) -> None:
    """The fitted parameters, the exponent with its error bar, the extrapolation and the downloads."""
    f = fitted.fit
    st.markdown(f"**{f.formula}** fitted to {len(f.y)} points")
    st.dataframe(pd.DataFrame(f.table()).map(plots.describe), hide_index=True, width="stretch")
    se = f.stderr().get("alpha", float("nan"))
    st.markdown(f"Exponent **α = {f.params['alpha']:.4f}**" + (f" ± {se:.4f}" if math.isfinite(se) else " (no bootstrap)")
                + f" · residuals {100 * f.rmse_log:.2f}% RMS · R² (log) {f.r2_log:.4f}")
    if at_x_to is not None:
        y_to, lo, hi = at_x_to
        st.markdown(f"At x = {x_to:.4g}: **{y_to:.4g}** ({lo:.4g} – {hi:.4g}, 95% band)")
    st.caption(f"Robust fit: Huber loss on log residuals (δ = {f.huber_delta:g}, as Hoffmann et al. 2022), "
               f"best of {f.starts} start(s); uncertainty from {0 if f.boot is None else len(f.boot)} bootstrap resamples.")
    if fitted.few_points:
        st.warning(f"Only {len(f.y)} points for {len(scaling.LAWS[law].params)} parameters: read the error bars, not the digits.",
                   icon=":material/warning:")
    curve = plots.curve_frame(f, x_to) if f.x.ndim == 1 else pd.DataFrame({"x": f.x[:, 0], "residual": f.residuals})
    d1, d2, d3 = st.columns(3)
    ui.download(d1, "Curve CSV", lambda: csv_bytes(curve), "scaling-fit.csv", "text/csv", key="sc_dl_csv")
    ui.download(d2, "Fit JSON", lambda: json.dumps(f.to_dict(), indent=2).encode(), "scaling-fit.json", "application/json",
                key="sc_dl_json")
    ui.download(d3, "Plot HTML", plots.figure_html(fig).encode(), "scaling-plot.html", "text/html", key="sc_dl_html",
                help="Works offline: plotly.js is inside the file.")


f = fitted.fit if fitted is not None else None
if fitted is not None:
    fit_charts(fitted, x_to)
    if src == "built-in":
        st.caption("Source: " + " · ".join(sorted(set(data["source"].dropna())) if "source" in data else []))

# ------------------------------------------------------------------------------------ compute budget
st.subheader("Compute-optimal allocation: how big a model, how many tokens?")
c = st.columns([2, 5])
ui.bounded_number(c[0], "Compute budget C (FLOPs)", "sc_budget", ALLOWED["sc_budget"], format="%.3e",
                  help="C = 6·N·D. Gopher and Chinchilla: 5.76e23; GPT-3: 3.14e23; BERT-large ≈ 2.7e20.")
own_law = f.params if (f is not None and law == "chinchilla") else None
try:
    rows = scaling.allocations(float(state["sc_budget"]), own_law)
except ExplorerError as err:
    ui.show_error(err)
else:
    alloc = plots.allocation_frame(rows)
    st.dataframe(alloc, hide_index=True, width="stretch", column_config={
        "N_opt (parameters)": st.column_config.NumberColumn(format="%.3e"),
        "D_opt (tokens)": st.column_config.NumberColumn(format="%.3e"),
        "tokens per parameter": st.column_config.NumberColumn(format="%.1f"),
        "predicted loss": st.column_config.NumberColumn(format="%.3f")})
    ui.download_buttons(alloc, "compute-optimal", "sc_alloc")
    st.caption("Chinchilla-form laws: closed form N_opt = G·(C/6)^(β/(α+β)), D_opt = G⁻¹·(C/6)^(α/(α+β)), "
               "G = (αA/(βB))^(1/(α+β)) (Hoffmann et al. 2022, Eq. 4), checked against a numerical minimisation in the tests. "
               "Kaplan's N is non-embedding and his C is C_min in PF-days. Fit the L(N, D) law to see your own allocation here.")
with st.expander("Reference laws and their published constants"):
    ref = pd.DataFrame([{"law": r.name, "formula": r.formula, "constants": ", ".join(f"{k} = {v:g}" for k, v in r.params.items()),
                         "variables": r.variable, "source": r.source} for r in scaling.REFERENCE_LAWS.values()])
    st.dataframe(ref, hide_index=True, width="stretch")
    st.caption(f"For example, Chinchilla's law at N = 70B, D = 1.4T gives L = {scaling.reference_value('chinchilla', 70e9, 1.4e12):.3f} nats.")
with st.expander("How big, on how much: GPT-2's four sizes and LLaMA's tokens"):
    c = st.columns(2)
    gpt2 = pd.DataFrame(scaling.gpt2_sizes())[["parameters_reported", "layers", "d_model", "catalog_id", "source"]]
    c[0].dataframe(gpt2, hide_index=True, width="stretch")
    c[0].caption("GPT-2 grows in depth and width together: 12 → 48 layers, 768 → 1600 wide.")
    small, big, batch = (scaling.fact(k) for k in ("llama_7b_tokens", "llama_33b_tokens", "llama_batch_tokens"))
    c[1].markdown(f"- LLaMA-7B and -13B: **{small.value / 1e12:.1f}T** tokens\n- LLaMA-33B and -65B: **{big.value / 1e12:.1f}T** tokens\n"
                  f"- batch: {batch.value / 1e6:.0f}M tokens")
    c[1].caption(f"{small.source}. Far past Chinchilla's ~20 tokens per parameter for the small models: trained for "
                 "cheap inference, not compute-optimal training.")

ui.save_url_state(DEFAULTS)
