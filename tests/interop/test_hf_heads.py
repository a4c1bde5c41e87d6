"""Classifiers, regressors and QA models from and to transformers' ElectraFor<Task> classes.

`fixtures/hf_finetuned/` holds an ElectraForSequenceClassification (three labels), one with a
single label (transformers regresses) and an ElectraForQuestionAnswering, written by
transformers itself with the logits it computed and the spans its own span search picked
(`fixtures/make_hf_finetuned.py`). Tests marked live run transformers on what we write; they
need torch + transformers, or ELECTRA_TF_HF_PYTHON naming an interpreter that has them.
"""

import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from finetuning_support import make_pretrained_dir
from transformers_support import needs_transformers, transformers_outputs, transformers_python

from electra_tf.commands.convert import run as convert
from electra_tf.finetuning.saving import load_finetuned, save_finetuned

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "hf_finetuned")
EXPECTED = np.load(os.path.join(FIXTURES, "expected.npz"))
# Measured on a 2-core CPU: at most 9.2e-6 (classifier logits of magnitude up to 3.9),
# 2.6e-6 (regressor) and 1.7e-6 (QA logits) from transformers' PyTorch logits.
TOLERANCE = dict(atol=1e-5, rtol=1e-5)


def _inputs(data=EXPECTED):
    return {k: np.asarray(data[k], np.int32) for k in ("input_ids", "input_mask", "segment_ids")}


def _import(tmp_path, name, *flags):
    out = str(tmp_path / name)
    assert convert(["import-hf", os.path.join(FIXTURES, name), out, *flags]) == 0
    return out


def _copy_fixture(tmp_path, name, **config_changes):
    """A copy of a fixture directory with config.json changed (None deletes a key)."""
    directory = tmp_path / f"{name}-copy"
    shutil.copytree(os.path.join(FIXTURES, name), directory)
    with open(directory / "config.json", encoding="utf-8") as f:
        config = json.load(f)
    for key, value in config_changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    with open(directory / "config.json", "w", encoding="utf-8") as f:
        json.dump(config, f)
    return str(directory)


# --- import: transformers' logits -------------------------------------------------------------


def test_an_imported_classifier_gives_transformers_logits(tmp_path):
    model, info = load_finetuned(_import(tmp_path, "classifier"))
    np.testing.assert_allclose(
        np.asarray(model(_inputs())), EXPECTED["classifier_logits"], **TOLERANCE
    )
    assert model.head == "transformers" and model.dropout_rate == 0.2  # classifier_dropout
    task = info["task"]
    assert task["name"] == "sentiment" and task["task_type"] == "classification"
    assert task["label_names"] == ["negative", "neutral", "positive"]
    assert task["is_pair"] is False and info["max_seq_length"] == 32  # the model's positions
    assert info["do_lower_case"] is True and info["normalization"] == "bert"


def test_one_label_is_a_regressor_as_in_transformers(tmp_path):
    model, info = load_finetuned(_import(tmp_path, "regressor"))
    assert model.regression and info["task"]["task_type"] == "regression"
    assert info["regression_output_scale"] == 1.0
    np.testing.assert_allclose(
        np.asarray(model(_inputs())), EXPECTED["regressor_logits"][:, 0], **TOLERANCE
    )


def test_an_imported_qa_model_gives_transformers_logits(tmp_path):
    from electra_tf.finetuning.question_answering.model import answer_mask, span_mask

    model, info = load_finetuned(_import(tmp_path, "qa"))
    inputs = _inputs()
    sequence = model.encoder(inputs)
    unmasked = np.asarray(model.task_head.unmasked_logits(sequence))
    real = inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(
        unmasked[..., 0][real], EXPECTED["qa_start_logits"][real], **TOLERANCE
    )
    np.testing.assert_allclose(unmasked[..., 1][real], EXPECTED["qa_end_logits"][real], **TOLERANCE)
    mask = np.asarray(answer_mask(inputs["input_mask"], inputs["segment_ids"]))
    spans = np.asarray(span_mask(mask)).astype(bool)
    # The span mask is [CLS] and the context: the answer mask without the closing [SEP].
    closing = [15, 11]
    for row, sep in enumerate(closing):
        assert inputs["input_ids"][row, sep] == 3 and mask[row, sep] == 1
        expected = mask[row].astype(bool)
        expected[sep] = False
        np.testing.assert_array_equal(spans[row], expected)
    logits = model.task_head.logits(sequence, mask)
    start = np.asarray(logits["start_logits"])
    np.testing.assert_allclose(start[spans], EXPECTED["qa_start_logits"][spans], **TOLERANCE)
    np.testing.assert_allclose(start[~spans], EXPECTED["qa_start_logits"][~spans] - 1000, atol=1e-3)
    assert info["squad_version"] == "1.1" and info["null_score_threshold"] == 0.0
    assert info["max_seq_length"] == 32 and info["max_query_length"] == 16
    assert model.task_head.max_answer_length == info["max_answer_length"] == 30


def _windows(inputs):
    """The fixture's rows as QA windows of two examples: context piece p is characters [2p, 2p+2)."""
    from electra_tf.finetuning.question_answering.data import QAExample
    from electra_tf.finetuning.question_answering.features import QAFeatures

    length = inputs["input_ids"].shape[1]
    context = inputs["segment_ids"] * inputs["input_mask"]
    spans = np.full(inputs["input_ids"].shape + (2,), -1, np.int32)
    for row in range(len(context)):
        pieces = np.flatnonzero(context[row])[:-1]  # not the closing [SEP]
        spans[row, pieces, 0] = 2 * pieces
        spans[row, pieces, 1] = 2 * pieces + 2
    rows = len(context)
    features = QAFeatures(
        **inputs,
        start_positions=np.zeros(rows, np.int32),
        end_positions=np.zeros(rows, np.int32),
        is_impossible=np.zeros(rows, np.int32),
        example_index=np.arange(rows, dtype=np.int32),
        token_spans=spans,
        max_context=spans[..., 0] >= 0,
    )
    text = "".join(chr(0x4E00 + i) for i in range(2 * length))
    examples = [QAExample(str(row), "q", text, []) for row in range(rows)]
    return examples, features


def test_decoding_gives_the_spans_and_scores_of_transformers_span_search(tmp_path):
    """`decode` on the imported model: transformers' top 5 spans, scores as logs of its scores."""
    from electra_tf.finetuning.question_answering import decoding

    model, _ = load_finetuned(_import(tmp_path, "qa"))
    inputs = _inputs()
    outputs = {k: np.asarray(v) for k, v in model(inputs).items()}
    examples, features = _windows(inputs)
    _, null_odds, nbest = decoding.decode(examples, features, outputs, n_best_size=5)
    for row, example in enumerate(examples):
        best = nbest[example.qas_id]
        starts = [c["start"] // 2 for c in best]
        ends = [c["end"] // 2 - 1 for c in best]
        assert starts == EXPECTED["qa_span_starts"][row].tolist()
        assert ends == EXPECTED["qa_span_ends"][row].tolist()
        np.testing.assert_allclose(
            [c["score"] for c in best], np.log(EXPECTED["qa_span_scores"][row]), atol=1e-5
        )
        # The null odds: transformers' null score against its best span's, as logs.
        np.testing.assert_allclose(
            null_odds[example.qas_id],
            math.log(EXPECTED["qa_null_scores"][row])
            - math.log(EXPECTED["qa_span_scores"][row, 0]),
            atol=1e-5,
        )


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


@pytest.mark.parametrize(
    "max_answer_length, beam, slope", [(3, 6, 0.0), (30, 4, 0.0), (1, 3, 0.0), (2, 3, 2.0)]
)
def test_the_transformers_span_beam_holds_the_best_spans_of_an_exhaustive_search(
    rng, max_answer_length, beam, slope
):
    """Random logits through the head, against every (start, end) pair scored in NumPy.

    `slope` lowers the start logits and raises the end logits along the window,
    so that the likeliest ends lie beyond the longest answer from the likeliest
    starts.
    """
    import tensorflow as tf

    from electra_tf.finetuning.question_answering.model import TransformersSpanHead

    head = TransformersSpanHead(beam_size=beam, max_answer_length=max_answer_length)
    head.build((None, None, 2))
    head.kernel.assign(np.eye(2, dtype=np.float32))  # the logits are the inputs
    batch, length = 5, 14
    logits = rng.normal(0, 2, (batch, length, 2)).astype(np.float32)
    logits += slope * np.arange(length, dtype=np.float32)[:, None] * np.float32([-1, 1])
    mask = np.zeros((batch, length), np.float32)
    mask[:, 0] = 1
    for row, (first, last) in enumerate([(4, 13), (3, 9), (6, 7), (2, 12), (5, 6)]):
        mask[row, first : last + 1] = 1  # context pieces, then the closing [SEP] at `last`
    outputs = {k: v.numpy() for k, v in head(tf.constant(logits), tf.constant(mask)).items()}
    for row in range(batch):
        allowed = mask[row].copy()
        allowed[np.flatnonzero(allowed)[-1]] = 0  # the closing [SEP]
        start_lp = _log_softmax(logits[row, :, 0] - 1000 * (1 - allowed))
        end_lp = _log_softmax(logits[row, :, 1] - 1000 * (1 - allowed))
        context = np.flatnonzero(allowed[1:]) + 1
        every = sorted(
            (start_lp[s] + end_lp[e], s, e)
            for s in context
            for e in context
            if 0 <= e - s < max_answer_length
        )[::-1]
        found = sorted(
            (
                outputs["start_top_log_probs"][row, i] + outputs["end_top_log_probs"][row, i, j],
                int(outputs["start_top_index"][row, i]),
                int(outputs["end_top_index"][row, i, j]),
            )
            for i in range(beam)
            for j in range(beam)
            if outputs["start_top_index"][row, i] in context
            and outputs["end_top_index"][row, i, j] in context
            and 0
            <= outputs["end_top_index"][row, i, j] - outputs["start_top_index"][row, i]
            < max_answer_length
        )[::-1]
        n = min(beam, len(every))
        assert [(s, e) for _, s, e in found[:n]] == [(s, e) for _, s, e in every[:n]]
        np.testing.assert_allclose(
            [v for v, _, _ in found[:n]], [v for v, _, _ in every[:n]], atol=1e-5
        )
        np.testing.assert_allclose(
            outputs["answerable_logit"][row], start_lp[0] + end_lp[0] - every[0][0], atol=1e-5
        )


# --- import: what is refused ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, changes, message",
    [
        (
            "classifier",
            {"problem_type": "multi_label_classification"},
            "problem_type='multi_label_classification' (an independent sigmoid per label)",
        ),
        ("classifier", {"problem_type": "regression"}, "regression with 3 outputs"),
        (
            "regressor",
            {"problem_type": "single_label_classification"},
            "problem_type='single_label_classification' with one label",
        ),
    ],
)
def test_problem_types_we_do_not_compute_are_refused(tmp_path, capsys, name, changes, message):
    source = _copy_fixture(tmp_path, name, **changes)
    assert convert(["import-hf", source, str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {source}: {message}") and error.count("\n") == 1
    assert not os.path.exists(tmp_path / "out")


def test_a_head_of_another_shape_is_refused(tmp_path, capsys):
    from safetensors.numpy import load_file, save_file

    source = _copy_fixture(tmp_path, "qa")
    state = load_file(os.path.join(source, "model.safetensors"))
    state["qa_outputs.weight"] = np.zeros((3, 32), np.float32)
    save_file(state, os.path.join(source, "model.safetensors"))
    assert convert(["import-hf", source, str(tmp_path / "out")]) == 2
    assert "qa_outputs.weight has shape (3, 32), expected (2, 32)" in capsys.readouterr().err


def test_import_flags_apply_to_their_class(tmp_path, capsys):
    _, info = load_finetuned(_import(tmp_path, "classifier", "--text_pair"))
    assert info["task"]["is_pair"] is True
    # A GLUE pair task's name says pairs; --notext_pair overrides it.
    nli = _copy_fixture(tmp_path, "classifier", finetuning_task="mnli")
    assert convert(["import-hf", nli, str(tmp_path / "nli")]) == 0
    assert load_finetuned(str(tmp_path / "nli"))[1]["task"]["is_pair"] is True
    assert convert(["import-hf", nli, str(tmp_path / "single"), "--notext_pair"]) == 0
    assert load_finetuned(str(tmp_path / "single"))[1]["task"]["is_pair"] is False
    _, info = load_finetuned(_import(tmp_path, "qa", "--squad_version=2.0", "--max_seq_length=24"))
    assert info["squad_version"] == "2.0" and info["max_seq_length"] == 24
    # A SQuAD v2 task name says 2.0 (as export-hf names a 2.0 model's task).
    assert convert(["export-hf", str(tmp_path / "qa"), str(tmp_path / "qa-hf")]) == 0
    with open(tmp_path / "qa-hf" / "config.json", encoding="utf-8") as f:
        assert json.load(f)["finetuning_task"] == "squad_v2"
    assert convert(["import-hf", str(tmp_path / "qa-hf"), str(tmp_path / "qa-back")]) == 0
    assert load_finetuned(str(tmp_path / "qa-back"))[1]["squad_version"] == "2.0"
    capsys.readouterr()
    qa = os.path.join(FIXTURES, "qa")
    assert convert(["import-hf", qa, str(tmp_path / "x"), "--text_pair"]) == 2
    assert "--text_pair does not apply to an ElectraForQuestionAnswering" in capsys.readouterr().err
    pretrained = os.path.join(ROOT, "tests", "fixtures", "hf_checkpoints", "zip")
    assert convert(["import-hf", pretrained, str(tmp_path / "y"), "--squad_version=2.0"]) == 2
    assert "--squad_version applies to fine-tuned models" in capsys.readouterr().err


def test_fine_tuning_from_a_fine_tuned_directory_takes_its_encoder():
    from electra_tf.interop import checkpoints

    for name, head in (("classifier", "classifier.dense.bias"), ("qa", "qa_outputs.bias")):
        directory = os.path.join(FIXTURES, name)
        loaded = checkpoints.load_checkpoint(directory)
        assert loaded.model.hidden_size == 32 and not loaded.has_generator
        (note,) = [n for n in loaded.notes if n.startswith("not imported")]
        assert note.startswith(f"not imported from {directory}: ") and head in note


# --- export: what transformers reads ----------------------------------------------------------


@pytest.mark.parametrize("name", ["classifier", "regressor", "qa"])
def test_import_then_export_gives_back_transformers_weights_and_labels(tmp_path, name):
    from safetensors.numpy import load_file

    back = str(tmp_path / "back")
    assert convert(["export-hf", _import(tmp_path, name), back]) == 0
    original = load_file(os.path.join(FIXTURES, name, "model.safetensors"))
    written = load_file(os.path.join(back, "model.safetensors"))
    assert sorted(written) == sorted(original)
    for key, value in original.items():
        np.testing.assert_array_equal(written[key], value, err_msg=key)
    with open(os.path.join(FIXTURES, name, "config.json"), encoding="utf-8") as f:
        source = json.load(f)
    with open(os.path.join(back, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    assert config["architectures"] == source["architectures"]
    if name == "classifier":
        assert config["id2label"] == source["id2label"] and config["num_labels"] == 3
        assert config["problem_type"] == "single_label_classification"
        assert config["classifier_dropout"] == 0.2
    elif name == "regressor":
        assert config["problem_type"] == "regression" and config["num_labels"] == 1


def _save(model, directory, pretrained, info):
    save_finetuned(model, directory, info, os.path.join(pretrained, "vocab.txt"))
    return directory


def _random_head(model, seed):
    rng = np.random.default_rng(seed)
    for variable in model.task_head.trainable_weights:
        variable.assign(rng.normal(0, 0.5, variable.shape).astype(np.float32))


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    """Models of our own: each head, classifier, regressor (label scale 5) and QA."""
    from electra_tf.artifacts.pretrained import load_discriminator
    from electra_tf.finetuning.classification.data import CLASSIFICATION, REGRESSION, Task
    from electra_tf.finetuning.classification.model import build_classifier
    from electra_tf.finetuning.question_answering.model import build_qa_model

    root = tmp_path_factory.mktemp("hf_heads")
    pretrained = make_pretrained_dir(str(root / "pretrained"))
    text = {"max_seq_length": 16, "do_lower_case": True, "strip_accents": True}
    labels = Task("toy", CLASSIFICATION, ["neg", "pos"], ("accuracy",), "accuracy", True)
    scores = Task("sts", REGRESSION, None, ("pearson",), "pearson", True, label_scale=5.0)
    qa_info = {
        "kind": "question_answering",
        "squad_version": "2.0",
        "doc_stride": 8,
        "max_query_length": 6,
        "max_answer_length": 30,
        "null_score_threshold": 0.0,
    }
    directories = {}
    for head in ("electra", "transformers"):
        encoder = load_discriminator(pretrained).encoder
        model = build_classifier(encoder, 2, seed=1, head=head)
        _random_head(model, 1)
        directories[f"classifier-{head}"] = _save(
            model,
            str(root / f"classifier-{head}"),
            pretrained,
            {"kind": "classifier", "task": labels.to_dict(), **text},
        )
        encoder = load_discriminator(pretrained).encoder
        model = build_classifier(encoder, 1, regression=True, seed=2, head=head)
        _random_head(model, 2)
        directories[f"regressor-{head}"] = _save(
            model,
            str(root / f"regressor-{head}"),
            pretrained,
            {
                "kind": "classifier",
                "task": scores.to_dict(),
                "regression_output_scale": 5.0,
                **text,
            },
        )
        encoder = load_discriminator(pretrained).encoder
        model = build_qa_model(encoder, beam_size=4, seed=3, head=head)
        _random_head(model, 3)
        directories[f"qa-{head}"] = _save(
            model, str(root / f"qa-{head}"), pretrained, {**qa_info, **text}
        )
    return directories


@pytest.mark.parametrize(
    "name, message",
    [
        (
            "classifier-electra",
            "the classifier has the paper's head (one dense layer on [CLS]); "
            "ElectraForSequenceClassification has transformers' two-layer head",
        ),
        (
            "regressor-electra",
            "the classifier has the paper's head (one dense layer on [CLS])",
        ),
        (
            "qa-electra",
            "the model has ELECTRA's span head (the end conditioned on the start, and an "
            "answerability classifier); ElectraForQuestionAnswering scores start and end "
            "independently",
        ),
    ],
)
def test_the_original_heads_are_refused_saying_why_and_what_to_do(
    ours, tmp_path, capsys, name, message
):
    out = tmp_path / "hf"
    assert convert(["export-hf", ours[name], str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {ours[name]}: {message}")
    assert "Fine-tune with --task_head=transformers" in error and error.count("\n") == 1
    assert not os.path.exists(out)
    assert not any(p.name.startswith("hf.tmp") for p in tmp_path.iterdir())


def test_a_regressor_label_scale_is_folded_into_out_proj(ours, tmp_path):
    from safetensors.numpy import load_file

    out = str(tmp_path / "hf")
    assert convert(["export-hf", ours["regressor-transformers"], out]) == 0
    model, _ = load_finetuned(ours["regressor-transformers"])
    state = load_file(os.path.join(out, "model.safetensors"))
    head = model.task_head
    np.testing.assert_allclose(
        state["classifier.out_proj.weight"], 5 * head.out_proj.kernel.numpy().T
    )
    np.testing.assert_allclose(state["classifier.out_proj.bias"], 5 * head.out_proj.bias.numpy())
    np.testing.assert_array_equal(state["classifier.dense.weight"], head.dense.kernel.numpy().T)


def _toy_inputs():
    """[CLS] w w [SEP] w w w [SEP] rows in the tiny vocabulary, the second padded."""
    ids = np.array([[2, 8, 12, 3, 5, 9, 16, 11, 3], [2, 7, 3, 13, 17, 3, 0, 0, 0]], np.int32)
    mask = (ids != 0).astype(np.int32)
    segments = np.array([[0, 0, 0, 0, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 0, 0, 0]], np.int32)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


@needs_transformers
@pytest.mark.parametrize("name", ["classifier-transformers", "regressor-transformers"])
def test_transformers_reads_our_classifier_and_regressor_with_the_same_outputs(
    ours, tmp_path, name
):
    inputs = _toy_inputs()
    out = str(tmp_path / name)
    assert convert(["export-hf", ours[name], out]) == 0
    reference = transformers_outputs(out, inputs, tmp_path)
    model, info = load_finetuned(ours[name])
    ours_outputs = np.asarray(model(inputs))
    if model.regression:  # transformers' logit is the served score
        assert str(reference["problem_type"]) == "regression"
        ours_outputs = ours_outputs[:, None] * info["regression_output_scale"]
    else:
        assert list(reference["labels"]) == ["neg", "pos"]
        assert str(reference["problem_type"]) == "single_label_classification"
    np.testing.assert_allclose(reference["sequence_logits"], ours_outputs, **TOLERANCE)


@needs_transformers
def test_transformers_reads_our_qa_model_with_the_same_logits(ours, tmp_path):
    out = str(tmp_path / "hf")
    assert convert(["export-hf", ours["qa-transformers"], out]) == 0
    inputs = _toy_inputs()
    reference = transformers_outputs(out, inputs, tmp_path)
    model, _ = load_finetuned(ours["qa-transformers"])
    logits = np.asarray(model.task_head.unmasked_logits(model.encoder(inputs)))
    real = inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(reference["start_logits"][real], logits[..., 0][real], **TOLERANCE)
    np.testing.assert_allclose(reference["end_logits"][real], logits[..., 1][real], **TOLERANCE)


@needs_transformers
@pytest.mark.parametrize("name", ["classifier", "regressor", "qa"])
def test_transformers_reads_an_import_exported_back_with_its_own_logits(tmp_path, name):
    back = str(tmp_path / "back")
    assert convert(["export-hf", _import(tmp_path, name), back]) == 0
    reference = transformers_outputs(back, _inputs(), tmp_path)
    if name == "qa":
        real = EXPECTED["input_mask"].astype(bool)
        for which in ("start", "end"):
            np.testing.assert_allclose(
                reference[f"{which}_logits"][real], EXPECTED[f"qa_{which}_logits"][real], atol=1e-6
            )
    else:
        np.testing.assert_allclose(
            reference["sequence_logits"], EXPECTED[f"{name}_logits"], atol=1e-6
        )


# --- the imported models are served -----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, flags",
    [("classifier", ["--text_pair"]), ("regressor", []), ("qa", ["--squad_version=2.0"])],
)
def test_an_import_exports_and_passes_the_check(tmp_path, name, flags):
    from electra_tf.artifacts.serving_dir import read_serving_config
    from electra_tf.serving import check
    from electra_tf.serving.exporter import export_checkpoint

    version = export_checkpoint(_import(tmp_path, name, *flags), str(tmp_path / "export"), name)
    config = read_serving_config(version)
    assert config["head"] == "transformers"
    if name != "qa":
        assert config["forward"] == "lean"  # the lean forward pass computes transformers' head too
    report = check.check_export(version)
    assert report.ok, "\n".join(report.lines)


@pytest.mark.slow
def test_an_imported_qa_model_answers_raw_text_as_transformers_did(tmp_path):
    """predict on the export: transformers' answer, score and no-answer decision for each pair."""
    from electra_tf.serving.exporter import export_checkpoint

    model_dir = _import(tmp_path, "qa", "--squad_version=2.0")
    version = export_checkpoint(model_dir, str(tmp_path / "export"), "qa")
    questions, contexts = EXPECTED["qa_text_questions"], EXPECTED["qa_text_contexts"]
    with open(tmp_path / "in.jsonl", "w", encoding="utf-8") as f:
        for question, context in zip(questions, contexts):
            f.write(json.dumps({"question": str(question), "context": str(context)}) + "\n")
    out = tmp_path / "answers.jsonl"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "electra_tf.commands.predict",
            f"--saved_model={version}",
            f"--input={tmp_path / 'in.jsonl'}",
            f"--output={out}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    answers = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(answers) == len(questions)
    for row, answer in enumerate(answers):
        start, end = int(EXPECTED["qa_text_start"][row]), int(EXPECTED["qa_text_end"][row])
        assert (answer["start_char"], answer["end_char"]) == (start, end)
        assert answer["answer_text"] == str(contexts[row])[start:end]
        best = math.log(EXPECTED["qa_text_score"][row])
        null = math.log(EXPECTED["qa_text_null_score"][row])
        assert answer["score"] == pytest.approx(best, abs=1e-5)
        assert answer["no_answer_score"] == pytest.approx(null - best, abs=1e-5)
        assert answer["has_answer"] == (null <= best)


# --- heads of our own -------------------------------------------------------------------------


def test_saved_models_without_a_head_entry_keep_the_original_heads():
    fixtures = os.path.join(ROOT, "tests", "fixtures", "finetuned")
    for kind in ("classifier", "question_answering"):
        trial = os.path.join(fixtures, kind, "run", "trial_0")
        with open(os.path.join(trial, "model.json"), encoding="utf-8") as f:
            assert '"head"' not in f.read()
        model, _ = load_finetuned(trial)
        assert model.head == "electra"


def test_the_head_names_are_the_fine_tuning_flags_choices():
    from electra_tf.finetuning.classification import model as classifier_model
    from electra_tf.finetuning.kind.settings import TASK_HEADS
    from electra_tf.finetuning.question_answering import model as qa_model

    assert classifier_model.HEADS == qa_model.HEADS == TASK_HEADS


def test_transformers_heads_train_at_the_head_rate_and_the_lean_pass_computes_them(ours):
    from electra_tf.finetuning.kind.optimization import layerwise_multipliers
    from electra_tf.modeling import lean_forward

    model, _ = load_finetuned(ours["classifier-transformers"])
    rates = layerwise_multipliers(model.trainable_variables, 2, 0.5)
    head = {p: r for p, r in rates.items() if p.startswith("task_head/")}
    assert sorted(head) == [
        "task_head/dense/bias",
        "task_head/dense/kernel",
        "task_head/out_proj/bias",
        "task_head/out_proj/kernel",
    ]
    assert set(head.values()) == {1.0}
    inputs = _toy_inputs()
    assert lean_forward.supports(model)
    np.testing.assert_allclose(
        np.asarray(lean_forward.classifier_outputs(model, inputs)),
        np.asarray(model(inputs)),
        atol=1e-5,
    )
    qa, _ = load_finetuned(ours["qa-transformers"])
    rates = layerwise_multipliers(qa.trainable_variables, 2, 0.5)
    assert {p: r for p, r in rates.items() if p.startswith("task_head/")} == {
        "task_head/kernel": 1.0,
        "task_head/bias": 1.0,
    }


def test_a_tagger_has_no_other_head_to_choose():
    from electra_tf.errors import RunError
    from electra_tf.finetuning.kind.contract import TaskOptions
    from electra_tf.finetuning.kind.files import FileTaskOptions
    from electra_tf.finetuning.kind.settings import FinetuneOptions
    from electra_tf.finetuning.kinds import task_from_options

    options = TaskOptions(
        FinetuneOptions(train_file="train.conll", task_head="transformers"),
        FileTaskOptions(task_type="tagging"),
        given=frozenset({"task_head"}),
    )
    with pytest.raises(RunError, match="--task_head=transformers: a tagger has one head"):
        task_from_options(options)


def test_the_task_head_flag_reaches_the_tasks_and_their_settings(tmp_path):
    from electra_tf.finetuning.kind.contract import TaskOptions
    from electra_tf.finetuning.kind.files import FileTaskOptions
    from electra_tf.finetuning.kind.settings import FinetuneOptions
    from electra_tf.finetuning.kinds import task_from_options

    squad = tmp_path / "squad.json"
    context = "the movie was very good"
    qas = [{"id": "q", "question": "how?", "answers": [{"text": "good", "answer_start": 19}]}]
    paragraphs = [{"context": context, "qas": qas}]
    squad.write_text(json.dumps({"version": "1.1", "data": [{"paragraphs": paragraphs}]}))
    rows = tmp_path / "train.tsv"
    rows.write_text("text\tlabel\ngood\tpos\nbad\tneg\n")

    from electra_tf.finetuning.question_answering.options import QuestionAnsweringOptions

    def task(given=frozenset({"task_head"}), null_score_threshold=None, **run):
        qa = QuestionAnsweringOptions()
        if null_score_threshold is not None:
            qa.null_score_threshold = null_score_threshold
        return task_from_options(
            TaskOptions(
                FinetuneOptions(**run),
                FileTaskOptions(),
                given=given,
                kind_options={QuestionAnsweringOptions: qa},
            )
        )

    qa = task(task="squad", train_file=str(squad), task_head="transformers")
    assert qa.head == "transformers" and qa.null_score_threshold == 0.0  # transformers' rule
    assert qa.settings()["task_head"] == "transformers"
    qa = task(
        {"task_head", "null_score_threshold"},
        task="squad",
        train_file=str(squad),
        task_head="transformers",
        null_score_threshold=-1.5,
    )
    assert qa.null_score_threshold == -1.5
    original = task(set(), task="squad", train_file=str(squad))
    assert original.head == "electra" and original.null_score_threshold == -2.75
    assert "task_head" not in original.settings()  # earlier runs' results still match
    classifier = task(task="reviews", train_file=str(rows), task_head="transformers")
    assert classifier.head == "transformers"
    assert classifier.settings()["task_head"] == "transformers"
    assert "task_head" not in task(set(), task="reviews", train_file=str(rows)).settings()


@pytest.mark.slow
def test_fine_tuning_with_transformers_heads_writes_models_transformers_reads(tmp_path):
    """finetune.py --task_head=transformers, then export-hf (and transformers, where it runs)."""
    from finetuning_support import toy_sentences

    pretrained = make_pretrained_dir(str(tmp_path / "pretrained"))
    with open(tmp_path / "train.tsv", "w", encoding="utf-8") as f:
        f.write("text\tlabel\n")
        for text, label in toy_sentences(8):
            f.write(f"{text}\t{'pos' if label else 'neg'}\n")
    out = tmp_path / "run"
    result = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "finetune.py"),
            f"--init_checkpoint={pretrained}",
            f"--train_file={tmp_path / 'train.tsv'}",
            f"--dev_file={tmp_path / 'train.tsv'}",
            "--task=reviews",
            "--task_head=transformers",
            "--num_train_epochs=1",
            "--train_batch_size=4",
            "--max_seq_length=16",
            "--noexport",
            f"--output_dir={out}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    with open(out / "results.json", encoding="utf-8") as f:
        assert json.load(f)["settings"]["task_head"] == "transformers"
    hf_dir = str(tmp_path / "hf")
    assert convert(["export-hf", str(out), hf_dir]) == 0
    model, _ = load_finetuned(str(out / "trial_0"))
    assert model.head == "transformers"
    if transformers_python() is not None:
        inputs = _toy_inputs()
        reference = transformers_outputs(hf_dir, inputs, tmp_path)
        np.testing.assert_allclose(
            reference["sequence_logits"], np.asarray(model(inputs)), **TOLERANCE
        )
