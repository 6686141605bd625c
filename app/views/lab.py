"""Pre-training lab: train small family members on this server, watch them learn, re-run the papers' ablations
in miniature. Runs train in background processes (services.lab); this page starts, lists, compares and cancels
them, and never imports torch."""


import pandas as pd
import streamlit as st

from analysis import lab_plots, mutransfer_plots, verdict_plots
from app import ui
from core.errors import ExplorerError
from services import lab
from services.lab import ACTIVE, RunStatus, experiments

FORM = lab.FORM_CONFIG  # the inputs' first values are the use case's default run
#: The form's numeric fields: widget key → the run's field; first values, URL bounds and widget bounds all come from
#: the use case (lab.FORM_CONFIG, lab.FORM_LIMITS).
FIELDS = {"lb_layers": "layers", "lb_hidden": "hidden", "lb_heads": "heads", "lb_ffn": "ffn", "lb_seq": "seq_len",
          "lb_batch": "batch", "lb_steps": "steps", "lb_lr": "lr", "lb_seed": "seed"}
DEFAULTS = {"lb_preset": "albert", "lb_objective": FORM.objective, "lb_masking": FORM.masking, "lb_vocab": FORM.vocab,
            **{key: getattr(FORM, name) for key, name in FIELDS.items()},
            "lb_corpus": "wordnet", "lb_name": "", "lb_show": "", "lb_budget": "classroom", "lb_seeds": 3}
ALLOWED = {"lb_preset": list(lab.PRESETS), "lb_objective": list(lab.SINGLE_RUN_OBJECTIVES), "lb_masking": ["static", "dynamic"],
           **{key: lab.FORM_LIMITS[name] for key, name in FIELDS.items()}, "lb_seeds": lab.FORM_LIMITS["seeds"],
           "lb_vocab": list(lab.VOCABS), "lb_corpus": ["wordnet", "upload"], "lb_name": lambda v: v == "" or bool(lab.NAME.match(v)),
           "lb_show": lambda v: len(v) <= 100, "lb_budget": [*lab.BUDGET_NAMES, lab.CUSTOM]}
Label = experiments.Label
VERDICT_BOXES = {Label.AGREES: st.success, Label.AGREES_ON_DIRECTION: st.warning, Label.CANNOT_TELL: st.warning,
                 Label.DISAGREES: st.error, Label.NO_VERDICT: st.info}
VERDICT_ICONS = {Label.AGREES: ":material/check_circle:", Label.CANNOT_TELL: ":material/help:",
                 Label.DISAGREES: ":material/cancel:", Label.NO_VERDICT: ":material/info:"}
#: A class predicts a verdict as one of three answers ("agrees on direction only" counts as agrees).
CLASS_CHOICES = ("agrees", "cannot tell", "disagrees")
CLASS_ANSWER = {Label.AGREES: "agrees", Label.AGREES_ON_DIRECTION: "agrees", Label.CANNOT_TELL: "cannot tell",
                Label.DISAGREES: "disagrees"}
VOCAB_LABELS = {"wordnet-8k": "8,192 WordPiece (glosses)", "bert": "30,522 WordPiece (BERT's)"}
state = st.session_state


@st.cache_data(max_entries=16, show_spinner="Checking the text file…")
def checked_corpus(path: str) -> str:
    """Read the corpus once per (content-addressed) file, not on every rerun: InvalidData for binary, non-UTF-8 or
    empty files."""
    return lab.check_corpus(path)


def corpus_path(upload) -> str:
    """The lab service stores the uploaded file (content-addressed); it is checked once per file."""
    return checked_corpus(lab.save_corpus(upload.getvalue()))


def fmt_seconds(x: float | None) -> str:
    if x is None or x != x:
        return ""
    return f"{x:.0f} s" if x < 90 else f"{x / 60:.1f} min"


def runs_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per run: state, progress, time left, queue place, and what it measured."""
    places, waiting = lab.queue_positions(df), lab.waiting_runs(df)
    rows = []
    for r in df.to_dict("records"):
        p = lab.progress_of(r)
        ev = r["evaluation"] or {}
        status = ui.RUN_STATUS_TEXT.get(r["status"], r["status"])
        if r["status"] == RunStatus.QUEUED:
            status += f" (#{places.get(r['id'], '?')}" + (", after its sweep)" if r["id"] in waiting else ")")
        if r["cancel"] and r["status"] == RunStatus.RUNNING:
            status = "stopping…"
        rows.append({"run": r["name"], "objective": r["objective"], "status": status, "progress": round(100 * p["done"]),
                     "step": f"{p['step']:,} / {p['steps']:,}", "time left": fmt_seconds(p["seconds_left"]),
                     "loss now": r["curve"][-1][1] if r["curve"] else None, "held-out loss": ev.get("held_out_loss"),
                     "POS probe": ev.get("pos_probe_accuracy"), "probe, random init": ev.get("pos_probe_random_init"),
                     "NSP acc.": ev.get("nsp_accuracy"), "SOP acc.": ev.get("sop_accuracy"),
                     "trained for": fmt_seconds(r["seconds"]) if r["status"] != RunStatus.RUNNING else "", "message": r["message"]})
    return pd.DataFrame(rows)


def curves_chart(df: pd.DataFrame, title: str):
    long = lab.curves_frame(df)
    # Smoothed (a running mean of 20 steps), as training curves are shown in the papers; the raw loss is noisy.
    long["loss (smoothed)"] = long.groupby("run")["loss"].transform(lambda x: x.rolling(20, min_periods=1).mean())
    return lab_plots.loss_curves(long, y="loss (smoothed)", raw="loss", title=title, height=380)


ignored = ui.restore_url_state(DEFAULTS, ALLOWED)
st.title("Pre-training lab")
st.markdown("#### Train small family members on this server, watch them learn, and re-run the papers' ablations in miniature")
ui.warn_ignored(ignored, "lb_")
try:
    frame = lab.runs_table()  # the lab's supervisor (services.lab.supervise) starts queued runs and marks dead ones
    frame = frame[frame["objective"] != lab.FINETUNE]  # fine-tuning runs have their own page
except ExplorerError as err:
    ui.show_error(err)
    st.stop()

# ------------------------------------------------------------------------------------------ start


def tuning_of(preset: str | None):
    """A tuned preset's rate sweep (:class:`services.lab.presets.base.Tuning`); None for the others and unknown names."""
    known = lab.PRESETS.get(preset or "")
    return known.tuning if known else None


def number(where, label: str, key: str, **kwargs) -> None:
    """A numeric input of the form, bounded by the use case's limits for its field (:data:`FIELDS`)."""
    ui.bounded_number(where, label, key, ALLOWED[key], **kwargs)


def preset_inputs() -> str:
    """The experiment, what its paper found, and the single run's objective, masking, vocabulary and corpus: the corpus
    path ("" where an upload is unusable)."""
    c = st.columns([2, 3])
    c[0].selectbox("Experiment", list(lab.PRESETS), key="lb_preset", format_func=lambda k: lab.PRESETS[k].title)
    preset = lab.PRESETS[state["lb_preset"]]
    if preset.finding:
        c[1].markdown(f"**The paper found:** {preset.finding}  \n:gray[Source: {preset.paper}]")
    single = preset.single_run
    c = st.columns([3, 2, 3, 3] if single else [1, 1])  # a preset sets objective and masking: no empty first column
    if single:
        c[0].selectbox("Objective", list(lab.SINGLE_RUN_OBJECTIVES), key="lb_objective", format_func=lab.OBJECTIVES.get,
                       help="Distillation needs a teacher: the DistilBERT experiment trains one and distils from it.")
        c[1].segmented_control("Masking", ["dynamic", "static"], key="lb_masking",
                               help="Static: each text keeps the mask drawn the first time (BERT). Dynamic: a new mask every time "
                                    "(RoBERTa).")
    c[-2].selectbox("Vocabulary", list(lab.VOCABS), key="lb_vocab", format_func=VOCAB_LABELS.get,
                    help="\n\n".join(f"**{k}**: {v}" for k, v in lab.VOCABS.items()))
    c[-1].segmented_control("Corpus", ["wordnet", "upload"], key="lb_corpus",
                            format_func={"wordnet": "WordNet glosses", "upload": "your text file"}.get)
    if state["lb_corpus"] != "upload":
        st.caption("WordNet 3.0's 117,659 glosses (6.3 MB, Princeton's WordNet licence, `data/corpus/LICENSE-WordNet`); "
                   "2% held out for evaluation.")
        return "wordnet"
    up = st.file_uploader(f"UTF-8 text, one text per line (at most {lab.MAX_USER_CORPUS_BYTES // 2**20} MB)", type=["txt"],
                          key="lb_upload")
    try:
        return corpus_path(up) if up is not None else "wordnet"
    except ExplorerError as err:
        ui.show_error(err)
        return ""


def budget_inputs():
    """The budget of a preset that decides claims, said with its record here; the chosen budget, or None for custom
    (then the seed count is asked) and for presets without claims."""
    if not lab.offers_budgets(state["lb_preset"]):
        return None
    names = lab.budget_names(state["lb_preset"])
    if state["lb_budget"] not in names:  # a GPU budget kept from a preset that has one
        state["lb_budget"] = "classroom"
    c = st.columns([4.5, 1.5, 5])  # wide enough for the four budgets whole
    c[0].segmented_control("Budget", names, key="lb_budget", required=True, format_func=lambda b: lab.BUDGET_TITLES.get(b, b),
                           help="Classroom: what fits a lesson on a 2-core CPU. Thorough: what resolves more in about an hour "
                                "on one. GPU (some presets): the paper-sized budget their thorough was cut down from, hours on "
                                "a CPU, minutes on a GPU through the headless worker. Custom: the steps, batch and length below.")
    spend = lab.budget_for(state["lb_preset"], state["lb_budget"])
    if not spend:
        tuning = tuning_of(state["lb_preset"])
        number(c[1], "Seeds", "lb_seeds", help=f"{tuning.replicates + 2} seeds at least: {tuning.seeds_use(None)}, two at least."
               if tuning else "A verdict needs at least 2 seeds per arm.")
        return None
    state["lb_steps"], state["lb_batch"], state["lb_seq"] = spend.steps, spend.batch, spend.seq_len  # shown as the budget sets them
    suite = spend.downstream
    tuning = tuning_of(state["lb_preset"])
    seeds = f"**{spend.seeds} seeds** " + (f"({tuning.seeds_use(spend.seeds)})" if tuning else "per arm")
    c[2].caption(f"{seeds} × {spend.steps:,} steps × batch {spend.batch} × {spend.seq_len} tokens"
                 + (f"; widths {', '.join(map(str, spend.widths))}" if spend.widths else "")
                 + (f"; then each checkpoint fine-tuned on {', '.join(suite['tasks'])} ({suite['max_train']:,} examples, "
                    f"{suite['epochs']} epochs) and the same architecture from random initialisation" if suite else "")
                 + (f". {spend.minutes}" if spend.minutes else ""))
    kind, said = lab.record_for(state["lb_preset"], state["lb_budget"])
    (st.warning if kind == "does not decide" else st.caption)(
        ("**Known not to decide its claim at this budget.** " if kind == "does not decide" else "") + said)
    return spend


def run_inputs(corpus: str, fixed: bool) -> lab.LabRequest:
    """The run's shape, length, batch, steps, rate, seed and name (steps, batch and length greyed out where a budget
    ``fixed`` them), as the request the use case plans."""
    c = st.columns(5)
    number(c[0], "Layers", "lb_layers")
    number(c[1], "Hidden size", "lb_hidden", step=16)
    number(c[2], "Heads", "lb_heads")
    number(c[3], "Feed-forward", "lb_ffn", step=64)
    number(c[4], "Sequence length", "lb_seq", step=16, disabled=fixed)
    c = st.columns(5)
    number(c[0], "Batch", "lb_batch", disabled=fixed)
    number(c[1], "Steps", "lb_steps", step=100, disabled=fixed)
    tuning = tuning_of(state["lb_preset"])
    number(c[2], "Learning rate", "lb_lr", format="%.0e", disabled=tuning is not None,
           help=f"This preset's sweep sets every run's rate: 2^{min(tuning.log2_rates)} to 2^{max(tuning.log2_rates)}, each "
                "optimizer's chosen on the validation seeds." if tuning else None)
    number(c[3], "Seed", "lb_seed", help="The first seed; the arms' replicates use the next ones. A replication is independent "
                                         "of earlier ones only with seeds they did not use.")
    c[4].text_input("Name (optional)", key="lb_name", max_chars=lab.MAX_NAME_CHARS, placeholder="automatic",
                    help="Letters, digits, '.', '_' and '-'. The runs are named <name>-<arm> and their checkpoints trained/<name>-<arm>.")
    inputs = lab.TrainConfig(objective=state["lb_objective"], masking=state["lb_masking"], vocab=state["lb_vocab"], corpus=corpus,
                             **{name: state[key] for key, name in FIELDS.items()})
    return lab.LabRequest(preset=state["lb_preset"], config=inputs, name=state["lb_name"], budget=state["lb_budget"],
                          seeds=state["lb_seeds"])


def seeds_warning(frame: pd.DataFrame, seeds: int) -> None:
    """Seeds that earlier experiments of this preset used, with a button that moves past them."""
    reused = sorted(experiments.seeds_taken(state["lb_preset"], frame) & set(range(state["lb_seed"], state["lb_seed"] + seeds)))
    if not reused or lab.PRESETS[state["lb_preset"]].single_run:
        return
    fresh = experiments.fresh_seed(state["lb_preset"], frame)
    c = st.columns([5, 2], vertical_alignment="center")
    c[0].warning(f"Seed(s) {', '.join(map(str, reused[:8]))}{'…' if len(reused) > 8 else ''} were used by earlier "
                 f"experiments of this preset here: these runs would repeat them, not replicate them independently. "
                 f"Fresh seeds start at {fresh}.", icon=":material/content_copy:")
    c[1].button(f"Use fresh seeds (from {fresh})", key="lb_fresh_seed", on_click=state.__setitem__, args=("lb_seed", fresh))


def plan_table(plan) -> None:
    """Every run the request would start, priced by the calculator, and how it was priced."""
    st.dataframe(pd.DataFrame([{"run": run.name, "objective": lab.OBJECTIVES[run.config.objective],
                                "masking": run.config.masking, "hidden": run.config.hidden, "steps": run.config.steps,
                                "starts from": run.config.init or "random init",
                                "parameters (exact)": run.cost.parameters, "N (non-embedding)": run.cost.non_embedding,
                                "memory (MB, predicted)": run.memory_mb, "tokens (real)": run.tokens,
                                "training FLOPs": run.training_flops, "Kaplan's 6N FLOPs": run.kaplan_flops}
                               for run in plan.runs]),
                 hide_index=True, width="stretch",
                 column_config={"training FLOPs": st.column_config.NumberColumn(format="%.2e"),
                                "Kaplan's 6N FLOPs": st.column_config.NumberColumn(format="%.2e"),
                                "parameters (exact)": st.column_config.NumberColumn(format="localized")})
    st.caption(f"Parameters are counted by the calculator from the configuration (`analysis.params`, checked against "
               f"the models transformers builds); memory is the calculator's prediction for one fp32 step with the run's "
               f"optimizer (`analysis.memory`: AdamW keeps two states per parameter, Lion one); "
               f"this server allows {plan.memory_budget_mb:,} MB per run (BFE_LAB_MEMORY_MB). Tokens: "
               f"the real ones (the texts' mean length × batch × steps, read from the corpus; a batch is padded to its "
               f"longest text). FLOPs as the loop performs them (models.pretrain.flops): 3 × forward on the real tokens, "
               f"each output layer only where the loss reads it; Kaplan et al. 2020's 6N per token beside it for reference.")
    if plan.shipped_note:
        st.caption(plan.shipped_note)
    if plan.pace:
        st.caption(f"At this server's pace in its last finished run ({plan.pace:.2g} FLOP/s), these runs take about "
                   f"**{fmt_seconds(plan.training_seconds)}** of training, one after another, plus about 10 s each to start.")
    st.caption("What to expect at the defaults (2 layers × 128, batch 64, 1,200 steps): the loss falls from ln(8,192) ≈ 9 "
               "to the plateau of word frequencies (about 7) within the first minute, while every mask is filled with "
               "“of, the, a”; then context starts to pay: the probes fill words that fit the sentence.")


def start_button(plan) -> None:
    """Start, where the plan can; else why not."""
    if plan.too_big:
        st.error(f"Too large for this server: {', '.join(plan.too_big)} would need more than {plan.memory_budget_mb:,} MB. "
                 "Make the model, the batch or the sequence smaller.", icon=":material/block:")
    elif not plan.has_corpus:
        st.info("Upload a usable text file, or pick the WordNet corpus.")
    else:
        ui.start_runs(len(plan.runs), plan.group, lambda: lab.start(plan), "lb_show")


def start_form(frame: pd.DataFrame) -> None:
    """The form that plans, prices and starts an experiment."""
    corpus = preset_inputs()
    spend = budget_inputs()
    request = run_inputs(corpus, fixed=spend is not None)
    seeds_warning(frame, spend.seeds if spend else state["lb_seeds"])
    if spend:
        st.caption("The budget sets the steps, batch and length (greyed out above); the model's shape comes from the inputs. "
                   "Pick *custom* to set them yourself.")
    try:
        plan = lab.preview(request, history=frame)
        plan_table(plan)
        start_button(plan)
    except ExplorerError as err:
        ui.show_error(err)


with st.expander("**Start a run**", expanded=not len(frame) or not frame["status"].isin(ACTIVE).any(), icon=":material/play_circle:"):
    start_form(frame)

# ------------------------------------------------------------------------------------------ runs, live
groups = list(dict.fromkeys(g or n for g, n in zip(frame["group"], frame["name"], strict=True)))
if not groups:
    st.info("No runs yet. Pick an experiment above and start it: a class can watch the loss fall within a minute.")
    ui.save_url_state(DEFAULTS)
    st.stop()
if state["lb_show"] not in groups:
    state["lb_show"] = groups[0]
st.selectbox("Show", groups, key="lb_show", help="An experiment's runs share a name; the newest is first.")
# Live while the shown experiment has runs waiting or training (another experiment's runs are not drawn here: polling for
# them, and the rerun when they end, would redraw this page forever).
live = bool(frame[(frame["group"] == state["lb_show"]) | (frame["name"] == state["lb_show"])]["status"].isin(ACTIVE).any())


@st.fragment(run_every=2.0 if live else None)
def watch() -> None:
    """The selected experiment's runs, refreshed every 2 s while one of them trains or waits."""
    mine = lab.runs_table(group=state["lb_show"])  # only the shown experiment's curves are read every 2 s
    if mine.empty:
        st.info("This experiment's runs were deleted.")
        return
    def curves() -> None:
        if any(len(c) for c in mine["curve"]):
            ui.chart(curves_chart(mine, f"Training loss: {state['lb_show']}"), "lb_curves", main=True, title=f"Pre-training lab: {state['lb_show']}",
                     caption="Training loss per step (running mean of 20 steps) of each run of the experiment.",
                     sources=("Trained on this server with BERT Family Explorer's pre-training lab (models.pretrain)",))

    if ui.presenting():  # on a projector the curves come first, on the first screen
        curves()
    table = runs_table(mine.sort_values("id"))
    counts = mine["status"].value_counts()
    st.markdown(" · ".join(f"{ui.RUN_STATUS_TEXT[k]}: **{counts[k]}**" for k in ui.RUN_STATUS_TEXT if k in counts))
    shown = table.drop(columns=["message"]).dropna(axis=1, how="all")  # no NSP/SOP columns for runs that have no such head
    st.dataframe(shown, hide_index=True, width="stretch",
                 column_config={"progress": st.column_config.ProgressColumn(min_value=0, max_value=100, format="%d%%"),
                                "loss now": st.column_config.NumberColumn(format="%.3f"),
                                "held-out loss": st.column_config.NumberColumn(format="%.3f"),
                                **{k: st.column_config.NumberColumn(format="%.2f") for k in
                                   ("POS probe", "probe, random init", "NSP acc.", "SOP acc.")}})
    for r in table.itertuples():
        if r.message:
            st.caption(f"**{r.run}**: {r.message}")
    if not ui.presenting():
        curves()
    active = mine[mine["status"].isin(ACTIVE) & ~mine["cancel"]]
    if len(active):
        c = st.columns([3, 1])
        pick = c[0].selectbox("Stop a run", list(active["name"]), key="lb_stop_pick", label_visibility="collapsed")
        if c[1].button("Cancel run", icon=":material/stop_circle:", key="lb_cancel"):
            rid = int(active[active["name"] == pick]["id"].iloc[0])
            st.toast(f"{pick}: {lab.cancel(rid)} — a running run stops within a second and keeps what it learned.")
    elif live:
        st.rerun()  # everything has ended: redraw the whole page once (evaluations, links) and stop polling


watch()


def claim_view(i: int, c: experiments.ClaimEntry, group: str) -> bool:
    """One claim of a preset: the paper's statement and source, its verdict, and the chart of its measure; False while
    a class is predicting the verdict (hidden until the teacher reveals it)."""
    claim, label = c.claim, c.verdict_label
    role = "Primary measure" if c.primary else "Exploratory"
    st.markdown(f"##### {role}: {c.label or claim.measure}\n**The paper:** {claim.statement}  \n"
                f":gray[Source: {claim.source}]")
    asked = ui.Ask()
    if c.verdict and c.primary:  # a class predicts the verdict before it is shown
        asked = ui.ask_the_class("choice", ui.question_context("lab", group, i, claim.statement),
                                 f"Will the lab's runs agree with the paper? {claim.statement}", CLASS_CHOICES, key=f"lb_q_{i}")
    if asked.revealed:
        said = CLASS_ANSWER.get(label, "cannot tell")
        ui.reveal_chart(asked.revealed, {ch: float(ch == said) for ch in CLASS_CHOICES}, key=f"lb_q_{i}",
                        model_label="the lab's verdict", value_label="verdict",
                        sources=(claim.source, f"Measured on this server: BERT Family Explorer pre-training lab, experiment {group}"))
    if asked.hide:
        return False
    if c.verdict:
        VERDICT_BOXES.get(label, st.info)(c.sentence, icon=VERDICT_ICONS.get(label))
    elif c.why_none:
        st.caption(f"No verdict yet: {c.why_none}.")
    drawn = claim_figure(c)
    if drawn:
        fig, how = drawn
        ui.chart(fig, f"lb_verdict_{i}", title=f"{claim.statement} ({group})", caption=(c.sentence or "No verdict yet.") + how,
                 sources=(claim.source, f"Measured on this server: BERT Family Explorer pre-training lab, experiment {group}"))
    return True


#: Per kind of claim (its entry's ``figure``): the chart, how to read it, and the entry's field it draws.
FIGURES = {
    "transfer": (mutransfer_plots.transfer_figure, " Lines: mean held-out loss over seeds; faint points: one seed each; "
                 "stars: each width's best learning rate. A diverged run leaves a gap.", "points"),
    "ratio": (verdict_plots.ratio_figure, " Circles: one seed's ratio; bar: the ratio of the means with its 95% interval "
              "(delta method over paired seeds); dashed: the claim's floor; dotted: the paper's value.", "points"),
    "trend": (verdict_plots.trend_figure, " One line per seed.", "points"),
    "arms": (verdict_plots.arms_figure, " {mean}: mean over seeds with its 95% t interval; circles: one seed each; grey: "
             "the same architecture from random initialisation.", "scores"),
}


def claim_figure(c: experiments.ClaimEntry) -> tuple | None:
    """The chart of a claim's entry and how to read it, or None before there is anything to draw."""
    draw, how, needs = FIGURES[c.figure]
    if not c.detail.get(needs):
        return None
    return draw(c.to_dict()), how.format(mean="Diamonds" if c.measure in verdict_plots.LOSSES else "Bars")


def claim_notes(c: experiments.ClaimEntry, preset: str, budget: str) -> None:
    """Under a claim: the effect over random initialisation, the data-limited runs, and what would resolve it."""
    if c.detail.get("control_effects"):
        st.caption("Effect over random initialisation: descriptive context for the verdict above (95% t over seeds, "
                   "not a tested claim, so no label).")
        st.dataframe(pd.DataFrame([{"arm": arm, "effect over random init": e["effect"], "95% low": e["low"], "95% high": e["high"]}
                                   for arm, e in c.detail["control_effects"].items()]),
                     hide_index=True, width="stretch",
                     column_config={k: st.column_config.NumberColumn(format="%+.3f") for k in
                                    ("effect over random init", "95% low", "95% high")})
    if c.detail.get("data_limited"):
        runs_named = ", ".join(f"{d['run']} ({d['tokens per parameter']})" for d in c.detail["data_limited"])
        st.caption("Data-limited runs (fewer than 20 tokens per parameter, all parameters counted as Chinchilla's "
                   "compute-optimal ratio does): " + runs_named + ". " + c.detail.get("data_limited_why", ""))
    bigger = lab.bigger_budget(preset, budget)
    if c.verdict_label == Label.CANNOT_TELL and bigger:
        st.caption(f"The {lab.BUDGET_TITLES.get(bigger, bigger)} budget spends more seeds, steps or test items per arm.")


def verdict_view(group: str) -> None:
    """A preset's verdicts: the claim and its source, the verdict in one line, a chart per measure (arms side by side
    with intervals, seeds as points, the random-init control), the effect over random initialisation, compute."""
    rep = experiments.report(group)
    if not rep.claims:
        return
    st.subheader("Verdict", anchor="verdict")
    budget, tuning = rep.budget or lab.CUSTOM, tuning_of(rep.preset)
    seeds = f"{rep.seeds or '?'} seeds ({tuning.seeds_use(rep.seeds)})" if tuning else f"{rep.seeds or '?'} seed(s) per arm"
    st.markdown(f"**{rep.title or rep.preset}** · budget: {budget} · {seeds}")
    if rep.plan_note:
        st.caption(rep.plan_note)
    if rep.note:
        st.warning(rep.note, icon=":material/delete:")
    if rep.state == experiments.ExperimentState.RUNNING:
        st.info(f"{rep.waiting} run(s) still waiting or training: the verdict comes when every run has finished.", icon=":material/hourglass_top:")
    elif rep.state == experiments.ExperimentState.PARTIAL:
        st.warning("Partial results, no verdict: " + ", ".join(rep.missing) + " did not finish. An ablation with a "
                   "missing arm or seed is not decided.", icon=":material/warning:")
    explored = False
    for i, c in enumerate(rep.claims):
        if not c.primary and not explored:
            explored = True
            st.markdown(f"#### Exploratory measures\nNot the paper's measure, or one part of it: shown to explore, each "
                        f"with a Bonferroni interval over the {c.family} exploratory comparisons (family-wise "
                        "95%), so that one spurious decisive label among them stays unlikely. The verdict is the primary "
                        "measure's above.")
        if claim_view(i, c, group):
            claim_notes(c, rep.preset, budget)
    st.caption("How the interval is made: Student's t over seeds (each seed's difference of scores is one paired "
               "observation), plus the test items' noise where the seeds share test items (a cluster-robust covariance "
               "term from the per-item scores; a lemma's items count as one cluster), with Satterthwaite's degrees of "
               "freedom. Seed and item counts that would resolve a \"cannot tell\" are estimates from the spread seen here.")
    if rep.arms:
        st.dataframe(pd.DataFrame([{"arm": arm, "runs": a.runs, "training FLOPs": a.flops, "pre-training": fmt_seconds(a.pretrain_seconds),
                                    "downstream": fmt_seconds(a.downstream_seconds)} for arm, a in rep.arms.items()]),
                     hide_index=True, width="stretch", column_config={"training FLOPs": st.column_config.NumberColumn(format="%.2e")})
        st.caption("Compute per arm: training FLOPs as the loop performs them (models.pretrain.flops: 3 × forward on the "
                   "real tokens each run trained on, each output layer only where the loss reads it, as ELECTRA's own "
                   "counter does); wall time on this server.")


def watch_view(done: pd.DataFrame) -> None:
    """A run's checkpoints over its training: the probes at a chosen step, and links to the pages at that step."""
    tables = {r.checkpoint: lab.over_training(r.checkpoint, r.evaluation) for r in done.itertuples()}
    tables = {k: t for k, t in tables.items() if len(t) > 1}
    if not tables:
        return
    st.markdown("##### Over its training")
    c = st.columns([3, 4])
    run = c[0].selectbox("Run", list(tables), key="lb_watch")
    table = tables.get(run) if run in tables else next(iter(tables.values()))
    steps = table["step"].tolist()
    if state.get("lb_watch_step") not in steps:
        state["lb_watch_step"] = steps[-1]
    step = c[1].select_slider("Training step", steps, key="lb_watch_step", format_func=lambda v: f"{v:,}",
                              help="The steps this run kept (log-spaced; 0 is its random initialisation).")
    left, right = st.columns([2, 3])
    ui.chart(lab_plots.probe_over_training(table, step), "lb_watch_pos", where=left, title=f"POS probe over the training of {run}",
             caption="Each point: the POS probe (below) refitted on the run's checkpoint at that step.",
             sources=(f"Measured on this server: BERT Family Explorer pre-training lab, run {run}",), show_caption=True)
    at = table[table["step"] == step].drop(columns=["step"]).T.reset_index()
    at.columns = ["probe", f"at step {step:,}"]
    # One column of numbers and word lists: as text, so Arrow gets one type (else Streamlit logs a failed conversion).
    at[at.columns[1]] = [ui.cell_text(v) for v in at[at.columns[1]]]
    right.dataframe(at, hide_index=True, width="stretch")
    model_at = run if step == steps[-1] else f"{run}@{step}"
    c = right.columns(2)
    c[0].page_link("views/parts.py", label="Which parts matter, at this step", icon=":material/troubleshoot:",
                   query_params={"wp_model": run, "wp_step": step})
    c[1].page_link("views/attention.py", label="Its attention, at this step", icon=":material/visibility:",
                   query_params={"at_model": run, "at_step": step})
    right.caption(f"Any page also opens it by id: **{model_at}**.")


try:
    verdict_view(state["lb_show"])
except ExplorerError as err:
    ui.show_error(err)

# ------------------------------------------------------------------------------------------ compare, use, export
mine = frame[(frame["group"] == state["lb_show"]) | (frame["name"] == state["lb_show"])]
done = mine[mine["status"].isin([RunStatus.FINISHED, RunStatus.CANCELLED]) & (mine["checkpoint"] != "")]
if len(done):
    st.subheader("Use the trained models")
    st.caption("Each checkpoint is saved as safetensors with its tokenizer under `BFE_MODEL_DIR/trained/<run>` and appears "
               "in every model picker as *trained here*.")
    for r in done.itertuples():
        c = st.columns(3)
        c[0].markdown(f"**{r.checkpoint}**")
        if r.objective in ("mlm", "mlm+nsp", "mlm+sop"):
            c[1].page_link("views/objectives.py", label="Fill masks with it", icon=":material/school:",
                           query_params={"ob_models": "", "ob_models_other": r.checkpoint, "ob_fill": "the [MASK] of a plant"})
        c[2].page_link("views/attention.py", label="Its attention", icon=":material/visibility:",
                       query_params={"at_model": r.checkpoint})
    probes = [{"run": r.name, "probe": p["probe"], "top 5": ", ".join(p["top"])}
              for r in done.itertuples() for p in (r.evaluation or {}).get("probes", [])]
    if probes:
        st.dataframe(pd.DataFrame(probes), hide_index=True, width="stretch")
    with ui.friendly_errors():
        watch_view(done)
    st.caption("**POS probe**: a linear classifier (logistic regression) reads each model's frozen last-layer vector of a word "
               "in WordNet's example sentences (not in the training corpus) and tags its part of speech; 200 test words, "
               "4 balanced classes (chance 25%). *Random init* is the same probe on the same shape with untrained weights: "
               "the difference is what pre-training taught. Cf. Tenney et al. 2019, What do you learn from context?")
scaled = lab.scaling_runs(mine)
if scaled:
    st.subheader("Scaling")
    ui.chart(lab_plots.loss_against_size(scaled.table, scaled.budgets), "lb_scaling", title=f"Pre-training lab: {state['lb_show']} (scaling)",
             caption="Final held-out masked-LM loss against non-embedding parameters (log-log); for an IsoFLOP grid, one "
                     "line per compute budget: the minimum of each line is the compute-optimal size (Chinchilla's approach 2).",
             sources=("Kaplan et al. 2020 (Figure 1); Hoffmann et al. 2022 (Chinchilla, approach 2, Figure 3)",))
    st.page_link("views/scaling.py", label=f"Fit a scaling law to these {len(scaled.table)} runs", icon=":material/show_chart:",
                 query_params={"sc_src": "lab", "sc_lab": state["lb_show"]})

so_far = experiments.results_so_far()
if so_far:
    st.subheader("Results so far")
    table = pd.DataFrame(so_far)
    table["experiment"] = "./lab?lb_show=" + table["experiment"]
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={"experiment": st.column_config.LinkColumn(display_text=r"lb_show=(.*)"),
                                **{k: st.column_config.NumberColumn(format="%+.3f") for k in ("effect", "low", "high")}})
    st.caption("Every preset's latest verdicts on this server, each beside the paper's claim and its source: the primary "
               "measure's verdict first, then the exploratory ones (Bonferroni intervals; \"interval\" gives the level). "
               "\"Agrees on direction only\": a fitted exponent with the paper's sign whose interval leaves out the paper's value.")

st.subheader("All runs")
c = st.columns([2, 2, 1])
ui.download(c[0], "Download all runs (CSV)", lambda: lab.runs_csv(), "pretraining-runs.csv", "text/csv")
ended = frame[~frame["status"].isin(ACTIVE)]
if len(ended):
    victim = c[1].selectbox("Delete a run", list(ended["name"]), key="lb_delete_pick", label_visibility="collapsed",
                            help="Deletes the run and its checkpoint.")
    if c[2].button("Delete", icon=":material/delete:", key="lb_delete"):
        st.toast(f"Deleted {lab.delete(int(ended[ended['name'] == victim].iloc[0]['id']))} and its checkpoint.")
        st.rerun()
ui.save_url_state(DEFAULTS)
