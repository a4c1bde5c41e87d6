"""Tiny pre-trained checkpoints and toy data for the fine-tuning tests."""

import os

WORDS = [
    "movie",
    "film",
    "plot",
    "the",
    "a",
    "was",
    "is",
    "very",
    "fun",
    "dull",
    "actor",
    "story",
    "good",
    "bad",
]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS


def write_vocab(path, tokens=VOCAB):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")
    return path


def make_pretrained_dir(directory, num_layers=2, seed=0, **overrides):
    """A randomly initialised tiny discriminator saved like a pre-training export.

    `overrides` change the tiny configuration (e.g. dropout_rate=0.0).
    """
    import keras

    from electra_tf.config import preset
    from electra_tf.modeling.electra import build_generator_and_discriminator

    os.makedirs(directory, exist_ok=True)
    write_vocab(os.path.join(directory, "vocab.txt"))
    config = preset(
        "tiny",
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_layers=num_layers,
        embedding_size=16,
        num_heads=2,
        intermediate_size=64,
        **overrides,
    )
    config.save_json(os.path.join(directory, "config.json"))
    keras.utils.set_random_seed(seed)
    _, discriminator = build_generator_and_discriminator(config.model)
    discriminator.save(os.path.join(directory, "discriminator.keras"))
    return directory


def toy_sentences(count, seed=0):
    """(sentence, label) with label 1 exactly when the sentence contains "good"."""
    import random

    rng = random.Random(seed)
    fillers = [w for w in WORDS if w not in ("good", "bad")]
    rows = []
    for i in range(count):
        words = rng.sample(fillers, 4)
        label = i % 2
        words.insert(rng.randrange(5), "good" if label else "bad")
        rows.append((" ".join(words), label))
    return rows


def toy_regression_task(count, dev_count):
    """A one-text regression task on `toy_sentences`, its head without dropout.

    Targets in [0, 1.2] make the dev metrics (Pearson, Spearman) continuous:
    any dev example lost or scored twice moves them. With a pre-trained
    model without dropout, one device and several replicas compute the same.
    """
    import numpy as np

    from electra_tf.finetuning.classification import data as tasks
    from electra_tf.finetuning.classification.task import ClassificationTask

    rows = toy_sentences(count)
    texts = [r[0] for r in rows]
    targets = np.array([r[1] + 0.1 * (i % 3) for i, r in enumerate(rows)], np.float64)
    indices = [str(i) for i in range(count)]
    definition = tasks.Task(
        "toyreg", tasks.REGRESSION, None, ("pearson", "spearman"), "pearson", False
    )
    train = tasks.Split("train", "memory", texts, None, targets, indices)
    dev = tasks.Split(
        "dev", "memory", texts[:dev_count], None, targets[:dev_count], indices[:dev_count]
    )
    task = ClassificationTask(definition, tasks.TaskData(train, {"dev": dev}, {}))
    build = task.build_model

    def build_model(encoder, seed):
        model = build(encoder, seed)
        model.head_dropout.rate = 0.0
        return model

    task.build_model = build_model
    return task


def toy_tagged_sentences(count, seed=0, tag_format="prefix"):
    """(words, tags) sentences: `actor` is a PER, `movie`/`film` (+ `plot`) a WORK.

    Tags are BIO with the position as prefix (B-PER) or suffix (PER-B).
    """
    import random

    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(2, 7))]
        tags = []
        for i, word in enumerate(words):
            if word == "actor":
                tag = ("B", "PER")
            elif word in ("movie", "film"):
                tag = ("B", "WORK")
            elif word == "plot" and i and words[i - 1] in ("movie", "film"):
                tag = ("I", "WORK")
            else:
                tag = None
            tags.append(
                "O"
                if tag is None
                else f"{tag[0]}-{tag[1]}"
                if tag_format == "prefix"
                else f"{tag[1]}-{tag[0]}"
            )
        rows.append((words, tags))
    return rows


def toy_tagging_task(count, dev_count=None, max_seq_length=16, with_test=False):
    """A prefix-BIO tagging task on `toy_tagged_sentences` (dev: other sentences)."""
    from electra_tf.finetuning.tagging.data import (
        TaggedSplit,
        TaggingData,
        TaggingDefinition,
        order_tags,
    )
    from electra_tf.finetuning.tagging.task import TaggingTask

    def split(name, rows, labelled=True):
        return TaggedSplit(
            name,
            "memory",
            [r[0] for r in rows],
            [r[1] for r in rows] if labelled else None,
            list(range(len(rows))),
        )

    train = split("train", toy_tagged_sentences(count))
    dev = split("dev", toy_tagged_sentences(dev_count or count, seed=1))
    test = split("test", toy_tagged_sentences(4, seed=2), labelled=False) if with_test else None
    definition = TaggingDefinition(
        "toyner",
        order_tags([t for s in train.tags for t in s]),
        "prefix",
        ("precision", "recall", "f1", "accuracy"),
        "f1",
    )
    return TaggingTask(definition, TaggingData(train, dev, test), max_seq_length=max_seq_length)
