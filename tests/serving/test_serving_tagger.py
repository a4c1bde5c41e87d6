"""Tagger exports: signatures, words and tags against the Python path, bad inputs, the check."""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from serving_support import make_serving_pretrained_dir

MAX_SEQ_LENGTH = 10
TAGS = ["O", "B-PER", "I-PER", "B-LOC"]
TEXTS = [
    "The movie was very good .",
    "한국어 문장도 中文 fun",
    "cafe\u00a0creme\tthe\nplot",
    "",
    "  ",
    " ".join(["movie"] * 12),
]  # the last one is longer than the model sees


@pytest.fixture(scope="module")
def tagger_export(tmp_path_factory):
    from electra_tf.artifacts.pretrained import load_discriminator
    from electra_tf.finetuning.saving import save_finetuned
    from electra_tf.finetuning.tagging.data import TaggingDefinition
    from electra_tf.finetuning.tagging.model import build_tagger
    from electra_tf.serving.exporter import export_checkpoint

    root = tmp_path_factory.mktemp("tagger_serving")
    pretrained = make_serving_pretrained_dir(str(root / "pretrained"))
    model = build_tagger(load_discriminator(pretrained).encoder, len(TAGS), seed=2)
    rng = np.random.default_rng(2)
    # A wide head, so that the tags differ from word to word.
    for variable in model.task_head.weights:
        variable.assign(rng.normal(0, 1.0, variable.shape).astype(np.float32))
    definition = TaggingDefinition(
        "toyner", TAGS, "prefix", ("precision", "recall", "f1", "accuracy"), "f1"
    )
    trial = str(root / "trial_0")
    save_finetuned(
        model,
        trial,
        {
            "kind": "tagger",
            "task": definition.to_dict(),
            "max_seq_length": MAX_SEQ_LENGTH,
            "do_lower_case": True,
            "strip_accents": True,
        },
        os.path.join(pretrained, "vocab.txt"),
    )
    return {"trial": trial, "version": export_checkpoint(trial, str(root / "export"), "ner")}


def _reference(version_dir):
    from electra_tf.serving.check import Reference

    return Reference.load(version_dir)


@pytest.mark.slow
def test_signatures_dtypes_shapes_and_config(tagger_export):
    loaded = tf.saved_model.load(tagger_export["version"])
    assert set(loaded.signatures) == {"serving_default", "words", "token_ids"}

    def io(name):
        function = loaded.signatures[name]
        return (
            {
                k: (v.dtype, v.shape.as_list())
                for k, v in function.structured_input_signature[1].items()
            },
            {k: (v.dtype, v.shape.as_list()) for k, v in function.structured_outputs.items()},
        )

    per_word = {
        "words": (tf.string, [None, None]),
        "tags": (tf.string, [None, None]),
        "tag_ids": (tf.int32, [None, None]),
        "probabilities": (tf.float32, [None, None, len(TAGS)]),
        "num_words": (tf.int32, [None]),
    }
    assert io("serving_default") == ({"text": (tf.string, [None])}, per_word)
    assert io("words") == (
        {"words": (tf.string, [None, None]), "num_words": (tf.int32, [None])},
        per_word,
    )
    assert io("token_ids")[1] == {
        "logits": (tf.float32, [None, None, len(TAGS)]),
        "probabilities": (tf.float32, [None, None, len(TAGS)]),
        "tag_ids": (tf.int32, [None, None]),
        "tags": (tf.string, [None, None]),
    }
    assets = os.path.join(tagger_export["version"], "assets")
    with open(os.path.join(assets, "serving_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    assert config["kind"] == "tagging" and config["label_names"] == TAGS
    assert config["tag_format"] == "prefix" and config["max_seq_length"] == MAX_SEQ_LENGTH
    with open(os.path.join(assets, "labels.txt"), encoding="utf-8") as f:
        assert f.read().split() == TAGS


def test_graph_splits_words_as_python_does():
    from electra_tf.finetuning.tagging.data import split_words
    from electra_tf.finetuning.tagging.serving import split_text

    texts = [
        "지미 카터는  조지아주에서\t태어났다.",
        "中文abc句子 カタカナ\U00020000x",
        "a\u00a0b\u3000c\u2028d\x0be\x0cf\rg\u200bh\u2009i",
        "",
        " \n ",
        "naïve café",
    ]
    got = split_text(tf.constant(texts)).to_list()
    assert [[w.decode() for w in row] for row in got] == [split_words(t) for t in texts]
    # Invalid UTF-8 bytes are dropped before splitting, as the tokenizer drops them.
    assert split_text(tf.constant([b"ab\xff c\xc3"])).to_list() == [[b"ab", b"c"]]


def test_tags_equal_the_python_path(tagger_export):
    from electra_tf.finetuning.tagging.check import python_tags
    from electra_tf.finetuning.tagging.data import split_words

    reference = _reference(tagger_export["version"])
    loaded = tf.saved_model.load(tagger_export["version"])
    served = {
        k: v.numpy()
        for k, v in loaded.signatures["serving_default"](text=tf.constant(TEXTS)).items()
    }
    expected, inputs = python_tags(reference, [split_words(t) for t in TEXTS])
    for name, value in expected.items():
        if value.dtype.kind == "f":
            np.testing.assert_allclose(served[name], value, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(served[name], value, err_msg=name)
    assert list(served["num_words"]) == [6, 5, 4, 0, 0, 12]
    # Words the model sees vary in tag; the words past the limit are O with no probabilities.
    assert len(set(served["tags"][0])) > 1
    assert list(served["tags"][5][MAX_SEQ_LENGTH - 2 :]) == [b"O"] * 4
    assert not served["probabilities"][5, MAX_SEQ_LENGTH - 2 :].any()
    assert list(served["tag_ids"][3]) == [-1] * 12 and list(served["tags"][3]) == [b""] * 12
    # The given-words signature agrees with the raw-text one on the same words.
    words = served["words"]
    by_words = loaded.signatures["words"](
        words=tf.constant(words), num_words=tf.constant(served["num_words"])
    )
    np.testing.assert_array_equal(by_words["tags"].numpy(), served["tags"])
    # Token ids: per position; at first pieces the same tags.
    by_ids = loaded.signatures["token_ids"](**{k: tf.constant(v) for k, v in inputs.items()})
    assert by_ids["tags"].numpy()[0, 1] == served["tags"][0, 0]


def test_empty_batches_give_empty_outputs(tagger_export):
    loaded = tf.saved_model.load(tagger_export["version"])
    out = loaded.signatures["serving_default"](text=tf.zeros([0], tf.string))
    assert {k: tuple(v.shape) for k, v in out.items()} == {
        "words": (0, 0),
        "tags": (0, 0),
        "tag_ids": (0, 0),
        "probabilities": (0, 0, len(TAGS)),
        "num_words": (0,),
    }
    out = loaded.signatures["words"](
        words=tf.zeros([0, 0], tf.string), num_words=tf.zeros([0], tf.int32)
    )
    assert out["tags"].shape == (0, 0)
    empty = tf.zeros([0, 0], tf.int32)
    out = loaded.signatures["token_ids"](input_ids=empty, input_mask=empty, segment_ids=empty)
    assert out["logits"].shape == (0, 0, len(TAGS))
    with pytest.raises(tf.errors.InvalidArgumentError, match="num_words must be <="):
        loaded.signatures["words"](words=tf.constant([["a"]]), num_words=tf.constant([2]))


@pytest.mark.slow
def test_check_passes_in_a_fresh_process(tagger_export):
    from electra_tf.serving import check

    report = check.check_export(tagger_export["version"])
    assert report.ok, "\n".join(report.lines)
    assert report.result["project_importable"] is False
    assert report.result["unsupported_ops"] == []
    assert "words" in report.result["signatures"]


def test_predict_command_gives_one_tag_per_word(tagger_export, tmp_path):
    from electra_tf.commands import predict as predict_command

    source = tmp_path / "texts.txt"
    source.write_text("The movie was good\n한국어 문장도\n\n", encoding="utf-8")
    output = tmp_path / "tags.jsonl"
    assert (
        predict_command.main(
            [
                "--saved_model",
                tagger_export["version"],
                "--input",
                str(source),
                "--output",
                str(output),
            ]
        )
        == 0
    )
    with open(output, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert [r["words"] for r in rows] == [["The", "movie", "was", "good"], ["한국어", "문장도"], []]
    assert [len(r["tags"]) for r in rows] == [4, 2, 0]
    assert all(len(p) == len(TAGS) for p in rows[0]["probabilities"])


def _bert_pretrained_dir(directory):
    """A tiny uncased checkpoint pre-trained with `bert` normalization, with `，` and `,`."""
    import keras
    from finetuning_support import VOCAB, write_vocab

    from electra_tf.config import preset
    from electra_tf.modeling.electra import build_generator_and_discriminator

    os.makedirs(directory, exist_ok=True)
    vocab = VOCAB + ["，", ",", "中", "文"]
    write_vocab(os.path.join(directory, "vocab.txt"), vocab)
    config = preset(
        "tiny",
        vocab_size=len(vocab),
        hidden_size=32,
        num_layers=1,
        embedding_size=16,
        num_heads=2,
        intermediate_size=64,
        do_lower_case=True,
        normalization="bert",
    )
    config.save_json(os.path.join(directory, "config.json"))
    keras.utils.set_random_seed(0)
    _, discriminator = build_generator_and_discriminator(config.model)
    discriminator.save(os.path.join(directory, "discriminator.keras"))
    return directory


@pytest.mark.slow
def test_a_tagger_from_a_bert_normalized_checkpoint_is_served_with_bert(tmp_path):
    """`，` stays `，` under `bert` (its own piece) and becomes `,` under `casefold`."""
    from finetuning_support import toy_tagging_task

    from electra_tf.artifacts.pretrained import resolve_pretrained
    from electra_tf.artifacts.serving_dir import read_serving_config
    from electra_tf.finetuning.kind.settings import FinetuneSettings
    from electra_tf.finetuning.tagging.check import python_tags
    from electra_tf.serving.check import Reference, check_export
    from electra_tf.serving.exporter import export_checkpoint
    from electra_tf.tokenization import TextPath
    from electra_tf.training.finetuning_loop import run_trials

    pretrained = resolve_pretrained(_bert_pretrained_dir(str(tmp_path / "pretrained")))
    settings = FinetuneSettings(
        output_dir=str(tmp_path / "run"), train_batch_size=8, num_train_epochs=1
    )
    run_trials(toy_tagging_task(8), pretrained, settings, print_fn=lambda _: None)
    version = export_checkpoint(str(tmp_path / "run"), str(tmp_path / "export"), "ner")
    config = read_serving_config(version)
    assert (config["normalization"], config["do_lower_case"]) == ("bert", True)

    sentences = [["actor", "中文，movie", "a,b"], ["，", "film"]]
    served = tf.saved_model.load(version).signatures["words"](
        words=tf.constant([s + [""] * (3 - len(s)) for s in sentences]),
        num_words=tf.constant([len(s) for s in sentences], tf.int32),
    )
    reference = Reference.load(version)
    bert, _ = python_tags(reference, sentences)
    casefold = dataclasses.replace(
        reference,
        tokenizer=TextPath(True, True, "casefold", 16).tokenizer(reference.tokenizer.vocab_file),
    )
    folded, _ = python_tags(casefold, sentences)
    np.testing.assert_allclose(served["probabilities"].numpy(), bert["probabilities"], atol=1e-5)
    assert not np.allclose(folded["probabilities"], bert["probabilities"], atol=1e-5)
    report = check_export(version)
    assert report.ok, "\n".join(report.lines)


def test_a_tagger_whose_weights_are_not_finite_is_not_exported(tagger_export, tmp_path):
    from electra_tf.finetuning.saving import load_finetuned
    from electra_tf.serving.exporter import ExportError, export_finetuned

    model, info = load_finetuned(tagger_export["trial"])
    model.task_head.bias.assign(np.full(model.task_head.bias.shape, np.nan, np.float32))
    vocab = os.path.join(tagger_export["trial"], "vocab.txt")
    with pytest.raises(ExportError, match="hold NaN or infinite values .* Nothing was exported"):
        export_finetuned(model, info, vocab, str(tmp_path), "diverged")
    assert not os.path.exists(tmp_path / "diverged")
