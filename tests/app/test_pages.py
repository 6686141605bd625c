"""AppTest of every page: renders with no exception, shows what it should, handles bad states."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core import registry
from tests.helpers import ENTRY, ROOT
from tests.helpers.pages import calc_page, markdown, metric, run


@pytest.fixture(autouse=True)
def fresh_streamlit_caches() -> None:
    """st.cache_data/st.cache_resource live for the process; each test starts as a new server would."""
    import streamlit as st

    st.cache_data.clear()
    st.cache_resource.clear()


def test_home_draws_the_family_tree() -> None:
    at = run()
    assert at.title[0].value == "BERT Family Explorer"
    text = markdown(at)
    for model_id in ("bert-base-uncased", "xlnet-base-cased", "gpt-3", "elmo", "sentence-transformers/all-MiniLM-L6-v2"):
        assert model_id in text
    assert "Models run on: CPU" in text
    # the tiny models of the test model dir are ready; the bundled MiniLM too
    assert "14 of 27 downloadable models are on this machine." in text
    assert len(at.get("plotly_chart")) == 1
    assert not at.error
    at.segmented_control(key="home_chart").set_value("Timeline and lineage").run()
    assert not at.exception and len(at.get("plotly_chart")) == 1


def test_home_filters() -> None:
    at = run()
    at.multiselect(key="home_objectives").set_value(["permutation-lm"]).run()
    text = "\n".join(h.proto.body for h in at.get("html"))  # the model cards
    assert "xlnet-base-cased" in text and "bert-base-uncased" not in text
    at.multiselect(key="home_objectives").set_value([]).run()
    assert "No model matches" in at.info[0].value and not at.exception


def test_presentation_mode_is_kept_in_the_url() -> None:
    at = run(present="1")
    assert at.toggle(key="present").value is True
    assert any("stMainBlockContainer" in m.value and "font-size: 18px" in m.value for m in at.markdown)
    at.toggle(key="present").set_value(False).run()
    assert "present" not in at.query_params


def test_a_page_that_marks_two_main_results_still_draws(tmp_path: Path) -> None:
    """The first main result of a run is the one presentation mode places; a second is a plain container, never a
    duplicate-key error (the results page's Charts view once marked two)."""
    page = tmp_path / "two.py"
    page.write_text("import streamlit as st\nfrom app import ui\n"
                    "with ui.main_result():\n    st.write('first')\n"
                    "with ui.main_result():\n    st.write('second')\n")
    at = AppTest.from_file(str(page)).run()
    assert not at.exception and [m.value for m in at.markdown] == ["first", "second"]
    at.run()
    assert not at.exception


def test_models_page_lists_and_loads() -> None:
    at = run("views/models.py")
    assert at.title[0].value == "Models & availability"
    table = at.dataframe[0].value
    assert len(table) == len(registry.all_models()) == 36 and set(table["status"]) >= {"ready", "downloads on first use", "catalog only (no weights)"}
    at.selectbox(key="models_pick").set_value("gpt2")
    at.button(key="models_load").click().run()
    assert not at.exception
    assert "gpt2 loaded from local folder" in at.success[0].value
    assert at.dataframe[1].value["model"].tolist() == ["gpt2"]


def test_models_page_explains_an_unavailable_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BFE_MODEL_DIR", str(tmp_path))
    at = run("views/models.py")
    at.selectbox(key="models_pick").set_value("roberta-large")
    at.button(key="models_load").click().run()
    assert not at.exception
    # not fetched yet is a state, not a mistake: a note that says how to get it
    assert "python -m models.fetch roberta-large" in at.info[0].value and not at.error


def test_a_bad_setting_is_a_message_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BFE_MODEL_CACHE_MB", "lots")
    at = AppTest.from_file(ENTRY, default_timeout=60).run()
    assert not at.exception
    assert any("BFE_MODEL_CACHE_MB" in e.value for e in at.error)


def test_home_never_imports_torch() -> None:
    """The Home page must not pay for torch/transformers, nor for scipy (0.8 s: it crept onto the first paint once, through the
    lab package's import in the warm-up), checked in a clean interpreter."""
    code = (
        "import sys; from streamlit.testing.v1 import AppTest; "
        f"at = AppTest.from_file({ENTRY!r}, default_timeout=60).run(); "
        "assert not at.exception, at.exception; "
        "heavy = [m for m in ('torch', 'transformers', 'sqlalchemy', 'gradio', 'scipy') if m in sys.modules]; "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_calculator_counts_the_preset_exactly_and_follows_edits() -> None:
    from analysis.params import count_parameters
    from core import registry

    at = calc_page()
    assert at.title[0].value == "Size, memory & compute"
    assert metric(at, "Parameters") == f"{count_parameters(registry.get('bert-base-uncased').config, 'pretraining'):,}"
    at.selectbox(key="sz_preset").set_value("albert-base-v2").run()
    assert not at.exception
    assert at.number_input(key="sz_emb").value == 128 and at.session_state["sz_type"] == "albert"
    assert any(m.label == "ALBERT (both)" for m in at.metric)
    at.number_input(key="sz_layers").set_value(24).run()
    assert "Edited" in markdown(at)
    assert at.query_params["sz_preset"] == "albert-base-v2" and at.query_params["sz_layers"] == "24"


def test_calculator_training_memory_shows_the_slides_example_and_components() -> None:
    assert not any("14.90 GiB" in i.value for i in calc_page().info)  # only the open tab (Parameters) is drawn
    at = calc_page(sz_tab="Training memory")
    assert any("14.90 GiB" in i.value for i in at.info)
    table = at.dataframe[0].value
    assert set(table["component"]) >= {"weights", "gradients", "optimizer states", "activations"}
    assert dict(zip(table["component"], table["how"], strict=True))["weights"] == "exact"
    at.number_input(key="sz_batch").set_value(64).run()
    bigger = at.dataframe[0].value
    assert bigger.set_index("component").loc["activations", "bytes"] == 8 * table.set_index("component").loc["activations", "bytes"]


def test_calculator_state_comes_back_from_the_url() -> None:
    at = calc_page(sz_preset="gpt2", sz_head="causal-lm", sz_opt="lion", sz_precision="bf16", sz_tab="Training memory")
    assert at.selectbox(key="sz_preset").value == "gpt2" and at.selectbox(key="sz_opt").value == "lion"
    assert at.number_input(key="sz_hidden").value == 768 and at.session_state["sz_type"] == "gpt2"
    assert not at.warning


def test_calculator_bad_inputs_are_messages() -> None:
    at = calc_page(sz_preset="custom", sz_heads="7")  # 7 heads do not divide 768
    assert not at.exception
    assert any("do not divide the hidden size" in e.value for e in at.error)
    at = calc_page(sz_batch="-3", sz_zero="9", sz_seq="abc")
    assert not at.exception and "batch, seq, zero" in at.warning[0].value.replace("sz_", "")
    # a sequence longer than the model's positions: the memory tab says so, the rest of the page draws
    at = calc_page(sz_seq="4096", sz_tab="Training memory")
    assert not at.exception
    assert any("longer than the model's 512 positions" in e.value for e in at.error)
    assert metric(at, "Parameters")


def test_scaling_page_fits_the_default_data_set_with_uncertainty() -> None:
    from analysis import scaling

    at = run("views/scaling.py")
    assert at.title[0].value == "Scaling laws"
    text = markdown(at)
    df = scaling.load_dataset("bert_size_ablation")
    expected = scaling.fit("power", df["parameters"], df["lm_ppl"], bootstrap=200)
    assert f"α = {expected.params['alpha']:.4f}** ± {expected.stderr()['alpha']:.4f}" in text
    assert "Devlin et al. 2019" in text  # the data's source is shown
    alloc = next(d.value for d in at.dataframe if "law" in d.value.columns and "formula" not in d.value.columns)
    assert list(alloc["law"]) == ["Chinchilla L(N, D)", "Chinchilla replication L(N, D)", "Kaplan"]
    gpt2 = at.dataframe[-1].value  # GPT-2's four sizes, from data/reference with their source
    assert list(gpt2["layers"]) == [12, 24, 36, 48] and gpt2["source"].str.contains("Radford et al. 2019").all()
    assert "1.4T" in text and "Touvron et al. 2023" in " ".join(c.value for c in at.caption)


def test_scaling_page_state_in_the_url_and_switching_laws() -> None:
    at = run("views/scaling.py", sc_ds="albert_configs", sc_transform="100 − y (error)", sc_boot="0")
    assert at.selectbox(key="sc_ds").value == "albert_configs" and not at.error
    assert "(no bootstrap)" in markdown(at)
    at.selectbox(key="sc_law").set_value("power_const").run()
    assert not at.exception and "L_∞ + A·x^(−α)** fitted to 6 points" in markdown(at)
    assert at.query_params["sc_law"] == "power_const"


def test_scaling_page_bad_choices_are_messages() -> None:
    # three RoBERTa points cannot pin a three-parameter law
    at = run("views/scaling.py", sc_ds="roberta_batch_size", sc_law="power_const")
    assert any("needs at least 4 points; there are 3" in e.value for e in at.error)
    at = run("views/scaling.py", sc_ds="nonsense", sc_boot="-5")
    assert "ds, boot" in at.warning[0].value
    # L(N, D) on Megatron's four configurations: too few points for five parameters
    at = run("views/scaling.py", sc_ds="megatron_sizes", sc_law="chinchilla")
    assert any("needs at least 6 points; there are 4" in e.value for e in at.error)


def test_attention_page_default_is_the_bundled_model() -> None:
    at = run("views/attention.py")
    assert at.title[0].value == "Attention explorer"
    assert "**sentence-transformers/all-MiniLM-L6-v2** · 13 tokens · 6 layers × 12 heads" in markdown(at)
    assert len(at.get("plotly_chart")) == 1 and not at.error
    at.segmented_control(key="at_view").set_value("stats").run()
    assert not at.exception and len(at.get("plotly_chart")) == 1
    at.segmented_control(key="at_view").set_value("rollout").run()
    assert not at.exception and "rollout" in markdown(at).lower()


def test_the_attention_heatmap_is_sent_as_plotly_writes_it_with_either_engine() -> None:
    """Charts go to the browser through plotly's standard-library JSON engine (app/ui/charts.py, faster on the heatmap's
    hover labels): the spec the page sent parses equal to what plotly's orjson engine writes for the same figure, and its
    head caption reads the head's statistics."""
    import json

    import plotly.io as pio

    from analysis import attention_plots
    from services import attention

    at = run("views/attention.py", at_layer="2", at_head="5")
    assert pio.json.config.default_engine == "json"
    sent = json.loads(at.get("plotly_chart")[0].proto.spec)
    r = attention.run("sentence-transformers/all-MiniLM-L6-v2", at.session_state["at_text"])
    fig = attention_plots.heatmap(r.weights[2, 5], list(r.tokens), title="layer 2, head 5")
    assert sent == json.loads(pio.to_json(fig, validate=False, engine="orjson"))
    view = attention.head(r, 2, 5)
    assert view.stats == pytest.approx({k: float(v[2, 5]) for k, v in attention.result_stats(r).items()}, rel=1e-12)
    assert view.caption() in [c.value for c in at.caption]


def test_attention_page_compares_two_tokenizers_and_keeps_state_in_the_url() -> None:
    at = run("views/attention.py", at_model="bert-base-uncased", at_compare="1", at_model2="gpt2", at_layer="1", at_head="1",
             at_text="Tokenizers disagree about words.")
    assert not at.error, [e.value for e in at.error]
    text = markdown(at)
    assert "**bert-base-uncased**" in text and "**gpt2**" in text and "causal" in text
    assert any(h.value == "Aligned by words" for h in at.subheader)
    assert len(at.get("plotly_chart")) == 4  # two heatmaps, two word-aligned heatmaps
    at.number_input(key="at_head").set_value(0).run()
    assert "at_head" not in at.query_params and at.query_params["at_model2"] == "gpt2"


def test_attention_page_bad_inputs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    at = run("views/attention.py", at_text="   ")
    assert any("The text is empty" in e.value for e in at.error) and not at.exception
    at = run("views/attention.py", at_text="a\x07b <script>alert(1)</script> 😀 東京", at_pair="B")
    assert not at.exception and any("control character" in i.value for i in at.info)
    at = run("views/attention.py", at_text="word " * 600)
    assert any("truncated" in i.value for i in at.info)
    at = run("views/attention.py", at_layer="99", at_head="99")  # beyond the model: clamped, not a crash
    assert not at.exception and at.number_input(key="at_layer").value == 5
    monkeypatch.setenv("BFE_MODEL_DIR", str(tmp_path))
    at = run("views/attention.py", at_model="roberta-large")
    assert any("python -m models.fetch roberta-large" in i.value for i in at.info) and not at.exception


@pytest.mark.parametrize(("page", "heavy"), [("views/calculator.py", ("torch", "transformers", "sqlalchemy", "gradio")),
                                             ("views/scaling.py", ("torch", "transformers", "sqlalchemy", "gradio")),
                                             ("views/results.py", ("torch", "transformers", "gradio"))])
def test_model_free_pages_never_import_torch(page: str, heavy: tuple[str, ...]) -> None:
    """The calculators, the scaling lab and the results database need no model: no torch (clean interpreter).
    Only the results page may import sqlalchemy: it is its job."""
    code = (
        "import sys; from streamlit.testing.v1 import AppTest; "
        f"at = AppTest.from_file({ENTRY!r}, default_timeout=60).run(); at.switch_page({page!r}).run(); "
        "assert not at.exception, at.exception; "
        f"heavy = [m for m in {heavy!r} if m in sys.modules]; "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_permutation_page_with_the_tiny_xlnet() -> None:
    # "is" and "a" are single tokens of both tiny tokenizers (their vocabularies are a few hundred pieces)
    at = run("views/permutation.py", pm_kind="left-to-right", pm_k="3", pm_ny="new york is a city .", pm_first="is",
             pm_second="a")
    assert at.title[0].value == "Permutation LM" and not at.error, [e.value for e in at.error]
    assert len(at.dataframe[0].value) == 3  # predictions for the last K = 3
    later = next(m for m in at.metric if m.label.startswith("Later"))
    assert later.value == "0"  # the self-check: a later token never moves the prediction
    earlier = next(m for m in at.metric if m.label.startswith("Earlier"))
    assert float(earlier.value) > 0
    assert any("New York" in h.value for h in at.subheader) and len(at.dataframe) >= 2
    assert "Segment recurrence" in " ".join(h.value for h in at.subheader)


def test_permutation_page_bad_orders_and_no_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    at = run("views/permutation.py", pm_kind="custom", pm_custom="0, 0, 1")
    assert any("not a permutation" in e.value and "repeated" in e.value for e in at.error) and not at.exception
    at = run("views/permutation.py", pm_text="   ")
    assert any("empty" in e.value for e in at.error)
    import streamlit as st

    monkeypatch.setenv("BFE_MODEL_DIR", str(tmp_path))
    monkeypatch.setenv("BFE_ONLINE", "0")
    st.cache_data.clear()  # availability is cached for 30 s; this "machine" just lost its models
    st.cache_resource.clear()
    at = run("views/permutation.py", pm_text="New York is a city")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("predictions are off" in i.value for i in at.info)
    assert len(at.get("plotly_chart")) == 3  # the order path and the two masks still work


def test_objectives_page_every_tab_runs_on_the_tiny_models() -> None:
    at = run("views/objectives.py")
    assert at.title[0].value == "Pre-training objectives" and not at.error, [e.value for e in at.error]
    text = markdown(at)
    # Fill the mask: three models side by side, two masks each
    assert all(f"**{m}**" in text for m in ("bert-base-uncased", "roberta-base", "distilbert-base-uncased"))
    assert len(at.get("plotly_chart")) == 6
    assert not at.metric and "**GPT-2**" not in text  # only the open tab is drawn (and runs its models)
    # pseudo-perplexity, NSP, ELECTRA, GPT-2 vs BERT: each tab as a link (or a click) opens it
    seen = {tab: run("views/objectives.py", ob_tab=tab) for tab in
            ("Which sentence is more natural?", "Does B follow A?", "Spot the replaced word", "Left to right")}
    assert all(not page.error for page in seen.values()), {t: [e.value for e in p.error] for t, p in seen.items()}
    assert "Sentence 1: pseudo-perplexity" in [m.label for m in seen["Which sentence is more natural?"].metric]
    assert "NSP: P(B follows A)" in [m.label for m in seen["Does B follow A?"].metric]
    assert "The generator rewrote it as" in markdown(seen["Spot the replaced word"])
    assert "**GPT-2**" in markdown(seen["Left to right"]) and "BERT cannot generate" in markdown(seen["Left to right"])


def test_objectives_page_interactions_and_link_state() -> None:
    at = run("views/objectives.py", ob_models="albert-base-v2", ob_mode="sequential", ob_nsp_model="albert-base-v2", ob_dynamic="1")
    assert not at.error, [e.value for e in at.error]
    charts = at.get("plotly_chart")
    assert len(charts) == 2 and all("filled at step" in c.proto.spec for c in charts)
    at.query_params["ob_tab"] = "Does B follow A?"  # a click on the tab: the browser puts it in the address
    at.run()
    assert any(m.label.startswith("SOP") for m in at.metric)
    at.query_params["ob_tab"] = "Left to right"
    at.run()
    at.toggle(key="ob_sample").set_value(True).run()
    assert not at.exception and at.query_params["ob_sample"] == "1"


def test_objectives_page_bad_inputs() -> None:
    at = run("views/objectives.py", ob_fill="no mask here", ob_s1="   ", ob_models="bert-base-uncased")
    assert "There is no [MASK]" in " ".join(e.value for e in at.error) and not at.exception
    at = run("views/objectives.py", ob_s1="   ", ob_tab="Which sentence is more natural?")
    assert "empty" in " ".join(e.value for e in at.error) and not at.exception
    at = run("views/objectives.py", ob_models="bert-base-uncased", ob_fill="[MASK] " * 9)
    assert any("limit is 8" in e.value for e in at.error)
    at = run("views/objectives.py", ob_models="bert-base-uncased,roberta-large")  # roberta-large is not on this machine
    assert any("roberta-large" in i.value and "models.fetch roberta-large" in i.value for i in at.info)


def results_html(at: AppTest) -> str:
    return "\n".join(str(h.proto.body) for h in at.get("html"))


def test_results_page_compares_checks_and_exports() -> None:
    at = run("views/results.py")
    assert at.title[0].value == "GLUE results database" and not at.error
    table = results_html(at)
    assert "RoBERTa-large" in table and "★" in table and "Liu et al. 2019, Table 5" in table  # the source is each cell's tooltip
    assert {b.label for b in at.get("download_button")} >= {"Table (CSV)", "Markdown", "LaTeX", "Rows with sources (CSV)"}
    for view in ("Charts", "Bigger is better?"):
        at.segmented_control(key="gl_view").set_value(view).run()
        assert not at.exception and len(at.get("plotly_chart")) >= 1, view
    at.segmented_control(key="gl_view").set_value("Score check").run()
    checks = at.dataframe[0].value
    assert {"match", "within rounding", "differs"} <= set(checks["status"])
    assert at.query_params["gl_view"] == "Score check"
    at.segmented_control(key="gl_view").set_value("Tasks & sources").run()
    assert "WNLI" in set(at.dataframe[0].value["key"]) and not at.exception


def test_results_page_state_comes_from_the_link() -> None:
    at = run("views/results.py", gl_split="test", gl_setting="ensemble", gl_models="ALBERT-xxlarge,RoBERTa-large")
    table = results_html(at)
    assert "ALBERT-xxlarge (ensemble)" in table and "XLNet-large" not in table and "99.2" in table and not at.warning
    at = run("views/results.py", gl_split="train", gl_models='["No such model"]')
    assert any("were not valid" in w.value for w in at.warning) and not at.exception


def test_results_page_adds_and_imports_with_clear_errors() -> None:
    from analysis import results_db

    # A citation used once is offered in the Source picker (AppTest cannot type a new option).
    results_db.add_result(results_db.NewResult(model="Earlier run", task="RTE", metric="acc", split="dev", value=60.0,
                                                     source="Liu et al. 2019, class re-run"))
    at = run("views/results.py", gl_view="Add results")
    assert "liu2019" not in at.selectbox(key="gl_add_source").options  # published keys are not offered
    at.selectbox(key="gl_add_task").set_value("RTE").run()
    at.selectbox(key="gl_add_model").set_value("BERT-base")
    at.selectbox(key="gl_add_source").set_value("Liu et al. 2019, class re-run")
    next(t for t in at.text_input if t.label.startswith("Variant")).set_value("class run")
    next(t for t in at.text_input if t.label == "Value").set_value("250")  # out of range
    at.button[0].click().run()
    assert any("outside the range" in e.value for e in at.error) and not at.exception
    next(t for t in at.text_input if t.label == "Value").set_value("71.5")
    at.button[0].click().run()
    assert any("Saved" in s.value for s in at.success), [e.value for e in at.error]
    at.button[0].click().run()  # the same again: refused as a duplicate, not stored twice
    assert any("already stored" in e.value for e in at.error) and not at.exception
    mine = results_db.results_frame(results_db.get_engine(), models=["BERT-base"], tasks=["RTE"])
    assert mine[mine["variant"] == "class run"]["value"].tolist() == [71.5]
    at.segmented_control(key="gl_view").set_value("Table").run()
    at.toggle(key="gl_variants").set_value(True).run()
    assert "BERT-base [class run]" in results_html(at) and "71.5" in results_html(at)


def test_results_page_explains_an_unusable_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "nosuchdb://somewhere/results")
    at = run("views/results.py")
    assert any("DATABASE_URL" in e.value for e in at.error) and not at.exception


@pytest.mark.slow  # trains and fine-tunes tiny models for real first: about 11 s
def test_a_lab_run_opens_at_the_steps_it_kept(tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pre-training run kept its weights over its training: the parts and attention pages load it at a chosen step
    (their slider over its steps), and the lab's page shows its probes at each step."""
    import shutil

    from models.locate import run_steps
    from tests.helpers.lab import seed_trained

    shutil.copytree(tiny_dir, tmp_path / "models", symlinks=True)
    monkeypatch.setenv("BFE_MODEL_DIR", str(tmp_path / "models"))
    group = seed_trained("t")
    steps = run_steps("trained/t-watch")
    assert len(steps) == 6
    at = run("views/parts.py", wp_model="trained/t-watch", wp_step=str(steps[2]))
    assert at.select_slider(key="wp_step").value == steps[2] and not at.error
    assert f"trained/t-watch@{steps[2]}" in markdown(at)  # the lens ran on the checkpoint at that step
    at.select_slider(key="wp_step").set_value(steps[-1]).run()
    text = markdown(at)
    assert "trained/t-watch@" not in text and "trained/t-watch" in text  # the last step is the run itself
    at = run("views/attention.py", at_model="trained/t-watch", at_step=str(steps[0]))
    assert at.select_slider(key="at_step").value == 0 and not at.error
    at = run("views/lab.py", lb_show=group)
    assert at.select_slider(key="lb_watch_step").value == steps[-1]  # the run as it ended, first
    at.select_slider(key="lb_watch_step").set_value(steps[1]).run()
    assert not at.exception and f"at step {steps[1]:,}" in str([df.value.columns.tolist() for df in at.dataframe])
    assert "trained/t-watch@" in markdown(at)


def test_the_lab_says_how_a_tuned_preset_spends_its_seeds_and_that_its_thorough_budget_cannot_decide(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before Start: the tuned Lion preset's seeds are not 'per arm' (2 tune every rate, the rest decide), and the
    committed bench output says the thorough budget did not decide, as a warning."""
    monkeypatch.setenv("BFE_MODEL_DIR", str(tmp_path))
    at = run("views/lab.py", lb_preset="lion-tuned", lb_budget="thorough")
    captions = " ".join(c.value for c in at.caption)
    assert "**5 seeds** (the first 2 tune each rate, the other 3 decide) × 600 steps" in captions and not at.exception
    assert any("Known not to decide its claim at this budget" in w.value for w in at.warning)
    assert at.number_input(key="lb_lr").disabled  # the sweep sets every rate
    at = run("views/lab.py", lb_preset="lion", lb_budget="thorough")
    assert "**5 seeds** per arm × 3,000 steps" in " ".join(c.value for c in at.caption)
    assert not at.number_input(key="lb_lr").disabled


def test_the_lab_says_when_an_experiment_ran_a_plan_its_budget_no_longer_has(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DistilBERT's thorough was 4 seeds × 2,000 steps before 2026-12-06: such an experiment still reads "thorough",
    and the verdict's header says its runs follow none of the budgets as they are now."""
    from dataclasses import replace

    from services.lab import claims, presets, run_queue
    from services.lab import experiments as lab_experiments

    monkeypatch.setenv("BFE_MODEL_DIR", str(tmp_path))
    base = presets.TrainConfig(seq_len=64, batch=64, steps=1200)
    thorough = presets.budget_of("distil", "thorough")
    run_queue.submit("distil", claims.apply_budget(base, replace(thorough, seeds=4, steps=2000)), "was", start=False, seeds=4,
                     budget="thorough")
    lab_experiments.submit("distil", base, "now", "thorough", start=False)
    at = run("views/lab.py", lb_show="was")
    captions = " ".join(c.value for c in at.caption)
    assert "follow none of this preset's budgets as they are now" in captions and not at.exception
    at = run("views/lab.py", lb_show="now")
    assert "follow none" not in " ".join(c.value for c in at.caption) and not at.exception
