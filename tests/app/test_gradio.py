"""The Gradio app on a local port, called through gradio_client on tiny models: same results as the library."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.servers import gradio_server

pytestmark = pytest.mark.slow  # each test starts a server or a browser: seconds, not milliseconds



@pytest.fixture(scope="module")
def server_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The results database the module's Gradio server reads (a test that writes runs for it points at this one)."""
    return f"sqlite:///{tmp_path_factory.mktemp('gradio-db') / 'results.db'}"


@pytest.fixture(scope="module")
def client(tiny_dir: Path, server_db: str):
    from gradio_client import Client

    env = {"DATABASE_URL": server_db, "BFE_MODEL_DIR": str(tiny_dir), "BFE_GRADIO_CONCURRENCY": "2", "BFE_GRADIO_MCP": "1"}
    with gradio_server(env) as url:
        yield Client(url, verbose=False)


def test_every_endpoint_is_documented(client) -> None:
    from app.gradio_app import API_NAMES

    api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert set(api) == {f"/{name}" for name in API_NAMES}
    assert {"/hidden_states", "/cka", "/nearest_contexts", "/attribution", "/scaling_fit", "/results", "/lab_runs",
            "/verdicts"} <= set(api)


def test_fill_mask_equals_the_library(client) -> None:
    from dataclasses import asdict

    from models.objectives import fill_mask

    got = client.predict("the cat sat on the [MASK] .", "bert-base-uncased, roberta-base, gpt2", 3, "independent", api_name="/fill_mask")
    for mid in ("bert-base-uncased", "roberta-base"):
        expected = [[asdict(p) for p in row] for row in fill_mask(mid, "the cat sat on the [MASK] .", 3)]
        assert [[p["id"] for p in row] for row in got["models"][mid]] == [[p["id"] for p in row] for row in expected]
        assert np.allclose([[p["probability"] for p in row] for row in got["models"][mid]],
                           [[p["probability"] for p in row] for row in expected], atol=1e-6)
    assert "masked-lm" in got["errors"]["gpt2"]


def test_attention_equals_the_library(client) -> None:
    from models.attention import extract_attention

    got = client.predict("bert-base-uncased", "a boy plays in the snow .", "a boy is outside .", 1, 2, api_name="/attention")
    r = extract_attention("bert-base-uncased", "a boy plays in the snow .", "a boy is outside .")
    assert got["tokens"] == list(r.tokens) and got["segments"] == list(r.segments)
    assert np.allclose(got["weights"], r.weights[1, 2], atol=1e-5)


def test_pseudo_perplexity_permutation_and_calculator_equal_the_library(client) -> None:
    from analysis.params import count_parameters
    from core import registry
    from models import permutation as P
    from models.objectives import pseudo_log_likelihood

    got = client.predict("bert-base-uncased", "the cat sat on the mat .", api_name="/pseudo_perplexity")
    assert got["pppl"] == pytest.approx(pseudo_log_likelihood("bert-base-uncased", "the cat sat on the mat .").pppl, rel=1e-5)
    masks = client.predict("new york is a city", "2,0,4,1,3", 2, api_name="/permutation_masks")
    inputs = P.permutation_inputs([2, 0, 4, 1, 3], 2, specials=[5, 6])
    assert masks["query_mask"] == P.query_mask(inputs).astype(int).tolist() and masks["targets"] == [1, 3]
    calc = client.predict("albert-base-v2", "pretraining", "fp32", "adamw", 4, 128, 0, 1, "T4 16 GB", api_name="/calculator")
    assert calc["parameters"] == count_parameters(registry.get("albert-base-v2").config, "pretraining")
    assert calc["memory_bytes"]["optimizer states"] == 8 * calc["parameters"]


def test_the_sparse_attention_endpoint_returns_the_library_masks_and_costs(client) -> None:
    """The calculator page's BigBird section as JSON: the masks the figures draw and the cost table, per length."""
    import numpy as np

    from analysis import sparse_attention as sa

    got = client.predict(32, 4096, api_name="/sparse_attention")
    want = sa.token_masks(32, random=2, window=3, global_tokens=2, seed=0)
    assert set(got["token_masks"]) == set(want) and all(np.array_equal(got["token_masks"][k], want[k]) for k in want)
    layout = sa.block_layout(4096, sa.PAPER_BLOCK_SIZE, sa.PAPER_RANDOM_BLOCKS, seed=0)
    assert all(np.array_equal(got["block_masks"][k], layout[k][0]) for k in layout)
    assert np.asarray(got["block_masks"]["bigbird"]).shape == (4096 // 64, 4096 // 64)
    assert [row["tokens"] for row in got["costs"]] == [c.length for c in sa.cost_table(head_dim=64)]
    assert "Zaheer" in got["source"]


@pytest.mark.parametrize(("args", "endpoint", "words"), [
    (("no mask here", "bert-base-uncased", 3, "independent"), "/fill_mask", "no [MASK]"),
    (("x [MASK]", "", 3, "independent"), "/fill_mask", "at least one model"),
    (("sentence-transformers/all-MiniLM-L6-v2", "   ", "", 0, 0), "/attention", "empty"),
    (("bert-base-uncased", "the cat", "", 9, 0), "/attention", "layers 0–1"),
    (("roberta-large", "the cat sat"), "/pseudo_perplexity", "models.fetch roberta-large"),
    (("a b c", "0,0,1", 1), "/permutation_masks", "not a permutation"),
    (("a b c", "random:x", 1), "/permutation_masks", "random:SEED"),
    (("gpt2", "base", "mixed", "adamw", 8, 4096, 0, 1, "T4 16 GB"), "/calculator", "longer than the model's 1024 positions"),
    (("elmo", "base", "mixed", "adamw", 8, 128, 0, 1, "T4 16 GB"), "/calculator", "catalog-only"),
    (("../../etc", "base", "mixed", "adamw", 8, 128, 0, 1, "T4 16 GB"), "/calculator", "not a valid model id"),
    (("someone/not-here", "the cat", "", 0, 0), "/attention", "models.fetch someone/not-here"),
    (("gpt2", "base", "mixed", "adamw", 10**12, 128, 0, 1, "T4 16 GB"), "/calculator", "between 1 and 100,000"),
    (("gpt2", "base", "mixed", "adamw", 8, 128, 0, 10**9, "T4 16 GB"), "/calculator", "between 1 and 100,000"),
    (("a b c", "9" * 5000, 1), "/permutation_masks", "characters long"),
    (("bert-base-uncased", "a\n" * 101, -1, "pca", 0, False), "/hidden_states", "At most 100 texts"),
    (("bert-base-uncased", "x" * 1001, -1, "pca", 0, False), "/hidden_states", "at most 1,000 characters"),
    (("bert-base-uncased", "the cat sat .", -1, "lda", 0, False), "/hidden_states", "lda is not in the list of choices"),
    (("bert-base-uncased", "the cat sat .", 7, "pca", 0, False), "/hidden_states", "layers 0–2"),
    (("bert-base-uncased", "gpt9", "the cat sat ."), "/cka", "Unknown model 'gpt9'"),
    (("bert-base-uncased", "the cat sat .", 0, 3, -1), "/nearest_contexts", "special token"),
    (("bert-base-uncased", "the cat sat .", 1, 500, -1), "/nearest_contexts", "between 1 and 100"),
    (("bert-base-uncased", "guess", "a", "b", 0, 10), "/attribution", "guess is not in the list of choices"),
    (("bert-base-uncased", "similarity", "a man .", "a dog .", 0, 10**6), "/attribution", "between 1 and 200"),
    (("gpt2", "sentence_relation", "a man .", "a dog .", 0, 5), "/attribution", "no trained pretraining head"),
    (("power", "1, 2, x", "3, 2, 1", "", 10, 0), "/scaling_fit", "not a number"),
    (("power", "1, 2, 3", "3, 2, 1", "", 10**6, 0), "/scaling_fit", "between 0 and 1,000"),
    (("chinchilla", "1, 2, 3", "3, 2, 1", "1, 2", 10, 0), "/scaling_fit", "as many N as D"),
    (("power", ",".join(str(i) for i in range(1, 2001)), ",".join("1" for _ in range(2000)), "", 1000, 0), "/scaling_fit",
     "2,000 points × 1,001 fits is more than 500,000"),
    (("BERT", "", "", True), "/results", "Did you mean: BERT-base"),
    (("somebody", ""), "/lab_runs", "is not in the list of choices"),
    ((20, 4096), "/sparse_attention", "is not in the list of choices"),
])
def test_bad_inputs_are_messages_and_the_server_survives(client, args, endpoint: str, words: str) -> None:
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError) as info:
        client.predict(*args, api_name=endpoint)
    assert words in str(info.value) and "Traceback" not in str(info.value)
    assert client.predict("gpt2", "base", "mixed", "adamw", 1, 16, 0, 1, "T4 16 GB", api_name="/calculator")["parameters"] > 0


def test_representation_endpoints_equal_the_library(client) -> None:
    from analysis.representations import project
    from models.representations import cross_model_cka, hidden_states, nearest_contexts

    texts = ["the bank raised its rates .", "we walked along the river bank ."]
    got = client.predict("bert-base-uncased", "\n".join(texts), 1, "pca", 0, True, api_name="/hidden_states")
    reps = hidden_states("bert-base-uncased", texts)
    x, where = reps.layer_matrix(1)
    assert got["layer"] == 1 and got["layers"] == reps.layers
    assert [(t["text_index"], t["position"]) for t in got["tokens"]] == list(where)
    assert [t["token"] for t in got["tokens"]] == [reps.items[t].tokens[p] for t, p in where]
    assert np.allclose(got["vectors"], x, atol=1e-5) and np.allclose(got["coords"], project(x, "pca", 0), atol=1e-5)
    assert "vectors" not in client.predict("bert-base-uncased", texts[0], -1, "pca", 0, False, api_name="/hidden_states")

    cka = client.predict("bert-base-uncased", "distilbert-base-uncased", "\n".join(texts), api_name="/cka")
    expected = cross_model_cka(reps, hidden_states("distilbert-base-uncased", texts))
    assert np.allclose(cka["cka"], expected.cka, atol=1e-5) and cka["best_match"] == expected.best_match.tolist()
    assert cka["words"] == expected.words

    near = client.predict("bert-base-uncased", texts[1], 6, 3, -1, api_name="/nearest_contexts")
    lib = nearest_contexts("bert-base-uncased", texts[1], 6, 3, -1)
    assert [(n["sentence"], n["position"]) for n in near["neighbours"]] == [(n.sentence, n.position) for n in lib]
    assert np.allclose([n["similarity"] for n in near["neighbours"]], [n.similarity for n in lib], atol=1e-5)


@pytest.mark.parametrize(("model", "output", "a", "b", "position", "library"), [
    ("sentence-transformers/all-MiniLM-L6-v2", "similarity", "A man plays the guitar.", "Someone makes music.", 0,
     lambda A, m, a, b, p: A.similarity(m, a, b, 8)),
    ("bert-base-uncased", "fill_mask", "the cat sat on the [MASK] .", "", 0, lambda A, m, a, b, p: A.fill_mask(m, a, None, 0, 8)),
    ("bert-base-uncased", "sentence_relation", "a man plays .", "he is happy .", 0,
     lambda A, m, a, b, p: A.sentence_relation(m, a, b, 8)),
    ("google/electra-small-discriminator", "replaced_token", "the cat sat on the mat .", "", 2,
     lambda A, m, a, b, p: A.replaced_token(m, a, p, 8)),
])
def test_attribution_equals_the_library(client, model, output, a, b, position, library) -> None:
    from models import attribution as A

    got = client.predict(model, output, a, b, position, 8, api_name="/attribution")
    r = library(A, model, a, b, position)
    assert got["tokens"] == list(r.tokens) and got["output"] == r.output and got["steps"] == 8
    assert np.allclose(got["integrated_gradients"], r.integrated_gradients, atol=1e-5)
    assert np.allclose(got["gradient_x_input"], r.gradient_x_input, atol=1e-5)
    # completeness: the integrated gradients add up to f(x) - f(baseline), up to the reported delta
    assert sum(got["integrated_gradients"]) == pytest.approx(got["f_input"] - got["f_baseline"], abs=abs(got["delta"]) + 1e-4)


def test_scaling_fit_equals_the_library(client) -> None:
    from analysis import scaling

    x, y = [1e6, 3e6, 1e7, 3e7, 1e8], [4.2, 3.9, 3.6, 3.35, 3.1]
    got = client.predict("power", ", ".join(map(str, x)), "4.2 3.9 3.6 3.35 3.1", "", 50, 1, api_name="/scaling_fit")
    fit = scaling.fit("power", x, y, bootstrap=50, seed=1)
    assert got["parameters"] == pytest.approx(fit.params, rel=1e-9) and got["bootstrap_resamples"] == 50
    assert got["interval_95"]["alpha"] == pytest.approx(list(fit.interval()["alpha"]), rel=1e-9)
    assert got["interval_95"]["alpha"][0] < got["parameters"]["alpha"] < got["interval_95"]["alpha"][1]
    n, d = [1e7, 1e7, 1e8, 1e8, 1e9, 1e9, 3e8], [1e9, 1e10, 1e9, 1e10, 1e10, 1e11, 3e10]
    nd = np.column_stack([n, d])
    loss = scaling.synthetic("chinchilla", {"E": 1.7, "A": 400.0, "B": 410.0, "alpha": 0.34, "beta": 0.28}, nd, 0.0)
    chin = client.predict("chinchilla", ", ".join(map(str, d)), ", ".join(map(str, loss)), ", ".join(map(str, n)), 0, 0,
                          api_name="/scaling_fit")
    assert chin["parameters"] == pytest.approx(scaling.fit("chinchilla", nd, loss, bootstrap=0).params, rel=1e-6)


def _counts() -> dict[str, int]:
    from sqlalchemy import func, select

    from analysis.results_db import get_engine
    from analysis.results_db.engine import session
    from analysis.results_db.schema import Result, SavedPack, StoredVerdict, TrainingRun

    with session(get_engine()) as s:
        return {t.__name__: s.scalar(select(func.count()).select_from(t)) for t in (Result, SavedPack, StoredVerdict, TrainingRun)}


def test_results_runs_and_verdicts_equal_the_library_and_write_nothing(client, server_db: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from analysis.results_db import runs as R
    from analysis.results_db import verdicts as stored
    from analysis.results_db.queries import results_frame
    from app.gradio_app import jsonable
    from services import lab
    from services.lab import experiments

    monkeypatch.setenv("DATABASE_URL", server_db)  # write what the server reads
    group = f"gradio-{time.time_ns()}"
    pre = R.create_run(f"{group}-mlm", "mlm", {"steps": 2}, group=group)
    R.start_run(pre)
    R.record_curve(pre, [(1, 6.5), (2, 6.0)], seconds=1.0)
    R.finish_run(pre, "finished", evaluation={"mlm_accuracy": 0.1}, seconds=1.0, tokens=64, parameters=1000)
    for mode, acc in (("frozen", 0.6), ("finetune", 0.8)):
        ft = R.create_run(f"{group}-{mode}", lab.FINETUNE, {"model": "tiny", "mode": mode, "task": "sst", "seed": 0}, group=group)
        R.start_run(ft)
        R.finish_run(ft, "finished", evaluation={"task": "sst", "accuracy": acc, "accuracy_interval": [acc - 0.1, acc + 0.1],
                                                  "macro_f1": acc, "majority_baseline": 0.5}, seconds=1.0)
    R.create_run(f"{group}-queued", "mlm", {"steps": 2}, group=group)  # not finished: not listed
    stored.store(group, "nsp", "nsp:sst", "agrees", {"claim": {"statement": "NSP helps", "source": "Devlin et al. 2019, Table 5"},
                                                    "verdict": {"effect": 0.1, "low": 0.05, "high": 0.15}, "label": "SST"})
    before = _counts()

    runs = client.predict("all", group, api_name="/lab_runs")
    assert {r["name"] for r in runs["runs"]} == {f"{group}-mlm", f"{group}-frozen", f"{group}-finetune"} and runs["count"] == 3
    assert next(r for r in runs["runs"] if r["objective"] == "mlm")["final_loss"] == 6.0
    delta = runs["finetune_delta"][0]
    assert delta["Δ (fine-tuned − frozen)"] == pytest.approx(0.2) and delta["frozen"] == pytest.approx(0.6)
    assert [r["name"] for r in client.predict("finetune", group, api_name="/lab_runs")["runs"]] == [f"{group}-finetune", f"{group}-frozen"]

    latest = client.predict("", api_name="/verdicts")["verdicts"]
    assert latest == jsonable(experiments.results_so_far())
    assert any(v["experiment"] == group and v["verdict"] == "agrees" for v in latest)
    report = client.predict(group, api_name="/verdicts")
    assert report["group"] == group and report["state"] == experiments.report(group).state
    assert report == jsonable(experiments.verdicts_json(group))
    assert experiments.verdicts_json("no-such-group") == {"group": "no-such-group", "state": "empty", "claims": [], "runs": [],
                                                        "missing": []}  # says only what it has

    rows = client.predict("bert-base, RoBERTa-large", "mnli", "dev", True, api_name="/results")
    lib = results_frame(models=["BERT-base", "RoBERTa-large"], tasks=["MNLI"], splits=["dev"], variants=False)
    assert rows["count"] == len(lib) > 0 and sorted(r["value"] for r in rows["rows"]) == sorted(lib["value"])
    assert all(r["citation"] and r["table"] for r in rows["rows"])  # every number carries its source
    assert _counts() == before  # reading wrote nothing


def test_the_which_parts_matter_endpoints_equal_the_library(client) -> None:
    from models import interventions

    text = "the cat sat on the [MASK] ."
    lens = client.predict("bert-base-uncased", text, 3, api_name="/logit_lens")
    mine = interventions.logit_lens("bert-base-uncased", text, 3)
    assert lens["answers"] == mine.answers and len(lens["layers"][0]) == len(mine.rows[0])
    assert [t for t, _ in lens["layers"][0][-1]["top"]] == [t for t, _ in mine.rows[0][-1].top]
    texts = ["the cat sat on the mat", "a dog ran in the park", "the bank raised its rates", "we walked along the bank"]
    imp = client.predict("bert-base-uncased", "\n".join(texts), 2, 2, "zero", api_name="/head_importance")
    assert np.allclose(imp["importance"], interventions.head_importance("bert-base-uncased", texts[0::2]).scores, atol=1e-5)
    assert imp["curve"]["removed"][0] == 0 and len(imp["curve"]["random_low"]) == len(imp["curve"]["removed"])
    patch = client.predict("bert-base-uncased", "the cat sat on the [MASK] .", "the dog sat on the [MASK] .", "mat", "cat",
                           api_name="/activation_patching")
    assert len(patch["effects"]) == len(interventions.layer_modules(
        __import__("models.loader", fromlist=["load"]).load("bert-base-uncased", task="masked-lm").model))
    with pytest.raises(Exception, match="same length"):
        client.predict("bert-base-uncased", "the cat sat on the [MASK] .", "the big dog sat on the [MASK] .", "mat", "cat",
                       api_name="/activation_patching")
    with pytest.raises(Exception, match="no trained masked-lm head"):
        client.predict("deberta-v3-base", text, 3, api_name="/logit_lens")
    heads = client.predict("bert-base-uncased", "the cat sat on the [MASK] .", "the dog sat on the [MASK] .", "mat", "cat",
                           "head", 1, api_name="/activation_patching")
    mine = interventions.activation_patching("bert-base-uncased", "the cat sat on the [MASK] .", "the dog sat on the [MASK] .",
                                             "mat", "cat", "head", 1)
    assert heads["unit"] == "head" and heads["position"] == 1 and np.allclose(heads["effects"], mine.effects, atol=1e-5)
    probe = client.predict("bert-base-uncased", "", 2, 2, "zero", "probe", "wic", 16, api_name="/head_importance")
    assert probe["target"] == "probe" and probe["measure"] == "wic probe accuracy"
    made = interventions.make_target("bert-base-uncased", "probe", task="wic", items=16)
    ranked = interventions.importance_of(made, made.chunks(slice(0, None, 2), 0))  # the curve ranks on items 1, 3, 5, …
    assert np.allclose(probe["importance"], ranked.scores, atol=1e-4) and probe["ranked_on"] == 8
    with pytest.raises(Exception, match="needs a task"):
        client.predict("bert-base-uncased", "", 2, 2, "zero", "probe", "", 16, api_name="/head_importance")


def test_mcp_lists_every_endpoint_and_answers_like_the_library(client) -> None:
    import asyncio
    from dataclasses import asdict

    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    from analysis.params import count_parameters
    from app.gradio_app import API_NAMES
    from core import registry
    from models.objectives import fill_mask

    async def talk() -> tuple[dict, Any, Any, Any]:
        async with streamablehttp_client(client.src.rstrip("/") + "/gradio_api/mcp/") as (read, write, _), ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            fill = await session.call_tool("fill_mask", {"text": "the cat sat on the [MASK] .", "models": "bert-base-uncased",
                                                         "top_k": 3, "mode": "independent"})
            calc = await session.call_tool("calculator", {"model": "albert-base-v2", "head": "pretraining", "precision": "fp32",
                                                          "optimizer": "adamw", "batch_size": 4, "seq_len": 128,
                                                          "zero_stage": 0, "data_parallel": 1, "gpu": "T4 16 GB"})
            bad = await session.call_tool("calculator", {"model": "gpt2", "batch_size": 10**12})
            unknown = await session.call_tool("nope", {})
            typed = await session.call_tool("scaling_fit", {"law": "power", "x": "1,2,3", "y": "3,2,1", "bootstrap": "lots"})
            assert unknown.isError and "Unknown tool" in unknown.content[0].text
            assert typed.isError and "'lots' is not of type 'integer'" in typed.content[0].text
            return tools, fill, calc, bad

    tools, fill, calc, bad = asyncio.run(talk())
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "fill_mask", "arguments": {
        "text": "a " * 300_000, "models": "bert-base-uncased"}}}).encode()
    assert _status_of_oversized_post(client.src.rstrip("/"), "/gradio_api/mcp/", big) == 413
    assert set(tools) == API_NAMES
    assert all(tools[n].description for n in tools), [n for n in tools if not tools[n].description]
    assert "texts" in tools["hidden_states"].inputSchema["properties"]
    assert not fill.isError
    got = json.loads(fill.content[0].text)["models"]["bert-base-uncased"]
    expected = [[asdict(p) for p in row] for row in fill_mask("bert-base-uncased", "the cat sat on the [MASK] .", 3)]
    assert [[p["id"] for p in row] for row in got] == [[p["id"] for p in row] for row in expected]
    assert json.loads(calc.content[0].text)["parameters"] == count_parameters(registry.get("albert-base-v2").config, "pretraining")
    assert bad.isError and "between 1 and 100,000" in bad.content[0].text and "Traceback" not in bad.content[0].text


def test_mcp_is_off_unless_the_setting_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import gradio as gr

    from app import gradio_app

    seen = []
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kw: seen.append(kw["mcp_server"]))
    monkeypatch.delenv("BFE_GRADIO_MCP", raising=False)
    gradio_app.main(["--port", "1"])
    monkeypatch.setenv("BFE_GRADIO_MCP", "1")
    gradio_app.main(["--port", "1"])
    assert seen == [False, True]


def test_twenty_concurrent_clients_are_all_answered(client) -> None:
    def call(i: int) -> float:
        return client.predict("bert-base-uncased", f"the cat sat on the mat {i} .", api_name="/pseudo_perplexity")["pppl"]

    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(call, range(20)))
    assert len(results) == 20 and all(r > 0 for r in results)


def _post(url: str, body: bytes) -> tuple[int, str]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _status_of_oversized_post(base: str, path: str, body: bytes) -> int:
    """POST ``body`` over a raw socket; the server may answer 413 and close before the body is sent, so a
    broken pipe while sending is expected and the status line is read from what came back."""
    import contextlib
    import select
    import socket

    host, port = base.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
        # The limit is applied from Content-Length: the answer usually comes before any of the body is sent.
        if not select.select([sock], [], [], 3)[0]:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(body)
        reply = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                reply += chunk
    return int(reply.split(b" ", 2)[1])


def test_an_unknown_endpoint_is_a_404_and_an_oversized_body_a_413(client) -> None:
    from app.gradio_app import MAX_BODY_BYTES

    base = client.src.rstrip("/")
    for path in ("/gradio_api/call/nope", "/gradio_api/run/nope", "/gradio_api/call/v2/nope"):
        code, text = _post(base + path, b'{"data": []}')
        assert code == 404 and "No endpoint /nope" in text
    big = json.dumps({"data": ["a " * MAX_BODY_BYTES, "left-to-right", 0]}).encode()
    assert _status_of_oversized_post(base, "/gradio_api/call/permutation_masks", big) == 413
    assert client.predict("a b c", "left-to-right", 1, api_name="/permutation_masks")["targets"] == [2]


def test_a_thirty_thousand_position_order_is_refused_quickly_and_others_are_not_slowed(client) -> None:
    from gradio_client.exceptions import AppError

    order = ",".join(str(i) for i in range(30_000))
    t0 = time.perf_counter()
    with pytest.raises(AppError, match="characters long"):
        client.predict("a b c", order, 1, api_name="/permutation_masks")
    assert time.perf_counter() - t0 < 5
    t0 = time.perf_counter()
    assert client.predict("gpt2", "base", "mixed", "adamw", 1, 16, 0, 1, "T4 16 GB", api_name="/calculator")["parameters"] > 0
    assert time.perf_counter() - t0 < 5


def test_every_endpoint_is_behind_the_queue() -> None:
    from app.gradio_app import API_NAMES, build

    demo = build()
    fns = {f.api_name: f for f in demo.fns.values() if f.api_name in API_NAMES}
    assert set(fns) == API_NAMES
    assert all(f.queue for f in fns.values()), [n for n, f in fns.items() if not f.queue]


def test_the_attention_tab_offers_its_heatmap_as_png_and_svg(monkeypatch: pytest.MonkeyPatch) -> None:
    from xml.etree import ElementTree

    from analysis import export
    from app import gradio_app
    from app.gradio_api.layout import _heatmap_files

    result = gradio_app.attention("sentence-transformers/all-MiniLM-L6-v2", "The cat sat on the mat.", "", 1, 2)
    png, svg = _heatmap_files(result)
    assert png.endswith("attention-layer1-head2.png") and Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "layer 1, head 2" in " ".join(ElementTree.parse(svg).getroot().itertext())
    warned = []
    monkeypatch.setattr(export, "chromium_path", lambda: None)
    monkeypatch.setattr("gradio.Warning", lambda message: warned.append(message))
    other = gradio_app.attention("sentence-transformers/all-MiniLM-L6-v2", "The cat sat on the mat.", "", 2, 3)  # not cached
    assert _heatmap_files(other) is None and "Chromium" in warned[0]


def test_any_checkpoint_through_the_api(client, tiny_dir) -> None:
    """A folder of one's own (typed into the dropdowns, or named in the API) works like a catalog model."""
    import json
    import shutil

    from analysis.params import count_parameters

    folder = tiny_dir / "students" / "gradio-bert"
    if not folder.exists():
        shutil.copytree(tiny_dir / "bert-base-uncased", folder)
    config = json.loads((folder / "config.json").read_text())
    calc = client.predict("students/gradio-bert", "masked-lm", "fp32", "adamw", 2, 32, 0, 1, "T4 16 GB", api_name="/calculator")
    assert calc["parameters"] == count_parameters(config, "masked-lm")
    att = client.predict("students/gradio-bert", "the cat sat", "", 1, 0, api_name="/attention")
    assert att["model"] == "students/gradio-bert" and len(att["weights"]) == len(att["tokens"])
