"""Fine-tuning lab: BERT's second half. Fine-tune models (the bundled MiniLM, one pre-trained in the lab, any
checkpoint) on offline downstream tasks, against the frozen encoder and against random initialisation, and see
what fine-tuning changed layer by layer. Runs train in background processes (services.lab); this page starts,
watches, compares and cancels them through that service, and never imports torch."""

import pandas as pd
import streamlit as st

from analysis import lab_plots
from analysis.tasks import BUILT_IN
from app import ui
from core import registry
from core.errors import ExplorerError
from services import lab
from services.lab import ACTIVE, RunStatus, finetuning

DEFAULTS = {"ft_models": [registry.bundled_id()], "ft_task": "wic", "ft_modes": ["finetune", "frozen"], "ft_seeds": 1,
            "ft_epochs": 3, "ft_batch": 16, "ft_lr": 0.0, "ft_train": 2000, "ft_test": 500, "ft_layer": "last4", "ft_len": 64,
            "ft_name": "", "ft_show": ""}
#: The form's numeric fields: widget key → the request's field; URL and widget bounds are the use case's
#: (finetuning.FORM_LIMITS).
FIELDS = {"ft_seeds": "seeds", "ft_epochs": "epochs", "ft_batch": "batch", "ft_train": "max_train", "ft_test": "max_test",
          "ft_len": "max_len"}
ALLOWED = {"ft_models": ui.picker_values, "ft_task": [*BUILT_IN, finetuning.UPLOAD], "ft_modes": lambda v: set(v) <= set(finetuning.TRAINING_MODES),
           **{key: finetuning.FORM_LIMITS[name] for key, name in FIELDS.items()}, "ft_lr": list(finetuning.FORM_RATES),
           "ft_layer": list(finetuning.LAYERS), "ft_name": lambda v: v == "" or bool(lab.NAME.match(v)), "ft_show": lambda v: len(v) <= 100}
SOURCE = "Fine-tuned on this server with BERT Family Explorer's fine-tuning lab (models.finetune)"
state = st.session_state


@st.cache_data(max_entries=8, show_spinner="Reading the task…")
def task_summary(name: str, max_train: int, max_test: int) -> dict:
    return finetuning.task_summary(name, max_train, max_test)


ignored = ui.restore_url_state(DEFAULTS, ALLOWED)
st.title("Fine-tuning lab")
st.markdown("#### BERT's second half: fine-tune a model on a downstream task, against the frozen encoder and against "
            "random initialisation, and see which layers fine-tuning changes")
ui.warn_ignored(ignored, "ft_")
try:
    frame = lab.runs_table()
    frame = frame[frame["objective"] == lab.FINETUNE]
except ExplorerError as err:
    ui.show_error(err)
    st.stop()

def number(where, label: str, key: str, **kwargs) -> None:
    """A numeric input of the form, bounded by the use case's limits for its field (:data:`FIELDS`)."""
    ui.bounded_number(where, label, key, ALLOWED[key], **kwargs)


def model_task_inputs() -> str:
    """The models, the task and the modes; the extra model typed in ("" for none)."""
    c = st.columns([3, 2, 3])
    choices = [registry.bundled_id(), *ui.trained_here("base")]
    choices += [m for m in state["ft_models"] if m not in choices]
    c[0].multiselect("Models", choices, key="ft_models", format_func=ui.model_label,
                     help="The bundled MiniLM (real weights), models pre-trained in the lab, or any checkpoint added below.")
    extra = ui.other_model("ft_other", task="base", where=c[0], label="Add another model (Hub id or folder)", optional=True)
    c[1].selectbox("Task", [*BUILT_IN, finetuning.UPLOAD], key="ft_task",
                   format_func={"wic": "Word in context (WiC-style)", "supersense": "Supersense of a word",
                                "upload": "My own CSV"}.get)
    c[2].multiselect("Modes", list(finetuning.TRAINING_MODES), key="ft_modes", format_func=finetuning.TRAINING_MODES.get)
    return extra or ""


def recipe_inputs():
    """Seeds, epochs, batch, rate, sizes and the frozen read-out; the column left for an uploaded task."""
    c = st.columns(7)
    number(c[0], "Seeds", "ft_seeds", help="Each seed is a run; the table averages them with their spread.")
    number(c[1], "Epochs", "ft_epochs")
    number(c[2], "Batch", "ft_batch")
    c[3].selectbox("Learning rate", list(finetuning.FORM_RATES), key="ft_lr", format_func=lambda v: "the recipe's" if not v else f"{v:g}",
                   help="The recipe's: 2e-5 to 5e-5 by model size, 1e-4 under 30M parameters (models.finetune.default_lr).")
    number(c[4], "Training examples", "ft_train", step=100)
    number(c[5], "Test examples", "ft_test", step=100)
    number(c[6], "Max tokens", "ft_len", step=16)
    c = st.columns([2, 2, 3])
    c[0].selectbox("Frozen: read", list(finetuning.LAYERS), key="ft_layer", format_func=finetuning.LAYERS.get)
    c[1].text_input("Experiment name", key="ft_name", placeholder="e.g. class-wic", max_chars=lab.MAX_NAME_CHARS)
    return c[2]


def task_inputs(where) -> tuple[str, dict | None]:
    """The task's stored file (an upload's; "" for a built-in task) and its summary, said under the inputs."""
    task_file, summary = "", None
    if state["ft_task"] == finetuning.UPLOAD:
        up = where.file_uploader(f"CSV: text,label or text_a,text_b,label (at most {lab.MAX_TASK_BYTES // 2**20} MB)", type=["csv"])
        if up is not None:
            uploaded = finetuning.upload_task(up.getvalue())
            task_file, summary = uploaded.path, uploaded.summary
    else:
        summary = task_summary(state["ft_task"], state["ft_train"], state["ft_test"])
    if summary:
        counts = summary["label_counts"]["test"]
        st.caption(f"**{summary['name']}**: {summary['sizes']['train']:,} training and {summary['sizes']['test']:,} test examples, "
                   f"{len(summary['labels'])} labels; majority-class baseline on test **{summary['majority_baseline']:.1%}** "
                   f"({summary['majority_label']}). Test labels: " + ", ".join(f"{k} {v}" for k, v in list(counts.items())[:8])
                   + (" …" if len(counts) > 8 else "") + f". {summary['source']}")
    return task_file, summary


def plan_and_start(plan) -> None:
    """The runs the request would start, priced, and Start where they fit."""
    st.dataframe(pd.DataFrame([{"run": run.config.run, "mode": finetuning.TRAINING_MODES[run.config.mode], "seed": run.config.seed,
                                "parameters": run.cost.parameters, "trainable (exact)": run.cost.trainable,
                                "memory (predicted, MB)": run.memory_mb} for run in plan.runs]),
                 hide_index=True, width="stretch",
                 column_config={"parameters": st.column_config.NumberColumn(format="localized"),
                                "trainable (exact)": st.column_config.NumberColumn(format="localized")})
    st.caption("Trainable parameters: every weight when fine-tuning; only the linear classifier on frozen features "
               "(scikit-learn's logistic regression). Memory: the calculator's fp32 AdamW step (frozen: one forward). "
               "At the defaults the bundled MiniLM fine-tunes on 2,000 WiC pairs in about 5 minutes on 2 CPU cores and "
               "ends a few points above chance (WiC is hard: BERT-large scores 65.5% on the real one).")
    if plan.too_big:
        st.error(f"Too large for this server (limit {plan.memory_budget_mb:,} MB): use a smaller batch, fewer tokens or a "
                 "smaller model.", icon=":material/block:")
    else:
        ui.start_runs(len(plan.runs), plan.group, lambda: finetuning.start(plan), "ft_show")


def start_form() -> None:
    """The form that plans, prices and starts fine-tuning runs."""
    st.caption("The lectures' recipe (Devlin et al. 2019, Section 3.2 and Appendix A.3): fine-tune every weight for 1–3 epochs, "
               "batch 16–32, learning rate 2e-5 to 5e-5, with linear warm-up and decay; against *frozen* features "
               "(Peters, Ruder & Smith 2019) and the same architecture from random weights (what pre-training bought).")
    extra = model_task_inputs()
    upload_column = recipe_inputs()
    try:
        task_file, summary = task_inputs(upload_column)
        request = finetuning.FineTuneRequest(
            models=(*state["ft_models"], *([extra] if extra else [])), task=state["ft_task"], task_file=task_file,
            modes=tuple(state["ft_modes"]), lr=state["ft_lr"], layer=state["ft_layer"], name=state["ft_name"],
            **{name: state[key] for key, name in FIELDS.items()})
        plan = finetuning.preview(request, summary)
        if plan.runs:
            plan_and_start(plan)
        elif plan.nothing_picked:
            st.info("Pick at least one model and one mode.")
    except ExplorerError as err:
        ui.show_error(err)


with st.expander("**Start runs**", expanded=not len(frame) or not frame["status"].isin(ACTIVE).any(), icon=":material/play_circle:"):
    start_form()

groups = list(dict.fromkeys(g or n for g, n in zip(frame["group"], frame["name"], strict=True)))
if not groups:
    st.info("No fine-tuning runs yet. Pick models, a task and modes above and start them.")
    ui.save_url_state(DEFAULTS)
    st.stop()
if state["ft_show"] not in groups:
    state["ft_show"] = groups[0]
st.selectbox("Show", groups, key="ft_show", help="An experiment's runs share a name; the newest is first.")
# Live while the shown experiment has runs waiting or training (another experiment's runs are not drawn here: polling for
# them, and the rerun when they end, would redraw this page forever).
live = bool(frame[(frame["group"] == state["ft_show"]) | (frame["name"] == state["ft_show"])]["status"].isin(ACTIVE).any())


@st.fragment(run_every=2.0 if live else None)
def watch() -> None:
    """The shown experiment's runs, refreshed every 2 s while one of them trains or waits."""
    mine = lab.runs_table(group=state["ft_show"])
    if mine.empty:
        st.info("This experiment's runs were deleted.")
        return
    rows = []
    for r in mine.sort_values("id").to_dict("records"):
        ev = r["evaluation"] or {}
        last = (ev.get("epochs") or [{}])[-1]
        rows.append({"run": r["name"], "mode": finetuning.TRAINING_MODES.get(r["config"].get("mode"), ""),
                     "status": ui.RUN_STATUS_TEXT.get(r["status"], r["status"]),
                     "step": r["curve"][-1][0] if r["curve"] else 0, "loss now": r["curve"][-1][1] if r["curve"] else None,
                     "epochs done": len(ev.get("epochs") or []),
                     "validation accuracy (last epoch)": last.get("validation_accuracy"), "test accuracy": ev.get("accuracy"),
                     "95% interval": "[{:.3f}, {:.3f}]".format(*ev["accuracy_interval"]) if ev.get("accuracy_interval") else "",
                     "macro-F1": ev.get("macro_f1"), "majority": ev.get("majority_baseline"),
                     "seconds": round(r["seconds"] or 0), "message": r["message"]})
    table = pd.DataFrame(rows)
    st.dataframe(table.drop(columns=["message"]), hide_index=True, width="stretch",
                 column_config={k: st.column_config.NumberColumn(format="%.3f") for k in ("loss now", "validation accuracy (last epoch)",
                                                                                 "test accuracy", "macro-F1", "majority")})
    for r in table.itertuples():
        if r.message:
            st.caption(f"**{r.run}**: {r.message}")
    long = lab.curves_frame(mine)
    if len(long):
        long["loss (smoothed)"] = long.groupby("run")["loss"].transform(lambda x: x.rolling(10, min_periods=1).mean())
        fig = lab_plots.loss_curves(long, y="loss (smoothed)", title=f"Training loss: {state['ft_show']}", height=340)
        ui.chart(fig, "ft_curves", title=f"Fine-tuning lab: {state['ft_show']}", caption="Training loss per step (running mean of 10).",
                 sources=(SOURCE,))
    active = mine[mine["status"].isin(ACTIVE) & ~mine["cancel"]]
    if len(active):
        c = st.columns([3, 1])
        pick = c[0].selectbox("Stop a run", list(active["name"]), key="ft_stop_pick", label_visibility="collapsed")
        if c[1].button("Cancel run", icon=":material/stop_circle:", key="ft_cancel"):
            st.toast(f"{pick}: {lab.cancel(int(active[active['name'] == pick]['id'].iloc[0]))}")
    elif live:
        st.rerun()


watch()

st.subheader("Frozen against fine-tuned", anchor="results")
table = lab.finetune_table(frame)
if table.empty:
    st.info("The table fills in as runs finish.")
else:
    st.caption("Accuracy on the test split (scored once, after the last epoch), one row per experiment × model × mode × "
               "task × settings, so that only seeds of one treatment are averaged: the mean over seeds, its spread "
               "(standard deviation) and Student's t 95% interval for the mean (a single seed shows its bootstrap interval "
               "over test items, lemmas resampled whole). The shape of Peters, Ruder & Smith 2019's Table 2.")
    ui.main_result().dataframe(table, hide_index=True, width="stretch",
                               column_config={k: st.column_config.NumberColumn(format="%.3f") for k in
                                              ("accuracy (mean)", "spread (sd)", "macro-F1", "majority baseline")})
    ui.table_to_pack(table, "ft_table", title="Fine-tuning lab: frozen vs fine-tuned", sources=(SOURCE,))
    delta = lab.finetune_delta(table)
    st.caption("Δ pairs a frozen and a fine-tuned row only where nothing but the mode differs (same experiment, model, task, "
               "epochs, rate and sizes).")
    st.dataframe(delta, hide_index=True, width="stretch",
                 column_config={k: st.column_config.NumberColumn(format="%+.3f" if k.startswith("Δ") else "%.3f")
                                for k in ("frozen", "fine-tuned", "Δ (fine-tuned − frozen)")})
with st.expander("The published table: Peters, Ruder & Smith 2019 (ELMo and BERT-base, frozen ❄ vs fine-tuned 🔥)"):
    try:
        pub = lab.peters_published()
        st.dataframe(pub.pivot_table(index=["model", "variant"], columns="task", values="value").reset_index(), hide_index=True,
                     width="stretch")
        st.caption("Source: Peters, Ruder & Smith 2019, To Tune or Not to Tune?, Table 2, as the BERT lecture's slide prints it "
                   "(the slide does not say which metric each column is). From the GLUE results database.")
    except ExplorerError as err:
        ui.show_error(err)

done = frame[frame["status"] == RunStatus.FINISHED]
if len(done):
    st.subheader("What fine-tuning changed, layer by layer")
    pick = st.selectbox("Run", list(done["name"]), key="ft_layers_pick")
    row = done[done["name"] == pick].iloc[0]
    change = pd.DataFrame(row["evaluation"].get("layer_change") or [])
    if len(change):
        fig = lab_plots.layer_change(change, f"What changed: {pick}")
        ui.chart(fig, "ft_layers", title=f"Fine-tuning lab: what changed in {pick}",
                 caption="Per layer: the relative weight change and linear CKA between the layer's token representations "
                         "before and after fine-tuning, on the task's test sentences (Merchant et al. 2020). The slide: large "
                         "changes up top, smaller lower down.", sources=(SOURCE, "Merchant et al. 2020 (EMNLP BlackboxNLP)"))
    if row["checkpoint"]:
        c = st.columns(2)
        c[0].page_link("views/attention.py", label=f"Attention of {row['checkpoint']}", icon=":material/visibility:",
                       query_params={"at_model": row["checkpoint"]})
        c[1].page_link("views/representations.py", label=f"Representations of {row['checkpoint']}", icon=":material/scatter_plot:",
                       query_params={"rp_model": row["checkpoint"]})

st.subheader("All fine-tuning runs")
c = st.columns([2, 2, 1])
ui.download(c[0], "Download all runs (CSV)", lambda: lab.runs_csv(), "finetuning-runs.csv", "text/csv")
ended = frame[~frame["status"].isin(ACTIVE)]
if len(ended):
    victim = c[1].selectbox("Delete a run", list(ended["name"]), key="ft_delete_pick", label_visibility="collapsed",
                            help="Deletes the run and its checkpoint.")
    if c[2].button("Delete", icon=":material/delete:", key="ft_delete"):
        st.toast(f"Deleted {lab.delete(int(ended[ended['name'] == victim].iloc[0]['id']))} and its checkpoint.")
        st.rerun()
ui.save_url_state(DEFAULTS)
