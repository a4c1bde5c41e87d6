"""Tiny fine-tuned and pre-trained models exported for the serving tests."""

import os

from finetuning_support import VOCAB, make_pretrained_dir

# The toy vocabulary plus Korean, accented and CJK pieces, so that the
# in-graph tokenization is compared on more than ASCII.
SERVING_VOCAB = VOCAB + ["한국어", "문장", "##도", "cafe", "creme", "中", "文", ".", "?"]


def make_trial_dir(
    directory, pretrained_dir, label_names=("neg", "pos"), is_pair=True, max_seq_length=16, seed=0
):
    """A fine-tuning trial directory as `save_finetuned` writes it (head untrained)."""
    from electra_tf.artifacts.pretrained import load_discriminator
    from electra_tf.finetuning.classification.data import CLASSIFICATION, REGRESSION, Task
    from electra_tf.finetuning.classification.model import build_classifier
    from electra_tf.finetuning.saving import save_finetuned

    regression = label_names is None
    task = Task(
        "toy",
        REGRESSION if regression else CLASSIFICATION,
        None if regression else list(label_names),
        ("pearson",) if regression else ("accuracy",),
        "pearson" if regression else "accuracy",
        is_pair,
        label_scale=5.0 if regression else 1.0,
    )
    encoder = load_discriminator(pretrained_dir).encoder
    model = build_classifier(encoder, task.num_outputs, regression, seed)
    info = {
        "kind": "classifier",
        "task": task.to_dict(),
        "max_seq_length": max_seq_length,
        "do_lower_case": True,
        "strip_accents": True,
        "regression_output_scale": task.label_scale,
    }
    save_finetuned(model, directory, info, os.path.join(pretrained_dir, "vocab.txt"))
    return directory


def make_serving_pretrained_dir(directory):
    """`make_pretrained_dir` with `SERVING_VOCAB` (same tiny architecture)."""
    import keras

    from electra_tf.config import preset
    from electra_tf.modeling.electra import build_generator_and_discriminator

    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(SERVING_VOCAB) + "\n")
    config = preset(
        "tiny",
        vocab_size=len(SERVING_VOCAB),
        hidden_size=32,
        num_layers=2,
        embedding_size=16,
        num_heads=2,
        intermediate_size=64,
        max_seq_length=24,
    )
    config.save_json(os.path.join(directory, "config.json"))
    keras.utils.set_random_seed(0)
    _, discriminator = build_generator_and_discriminator(config.model)
    discriminator.save(os.path.join(directory, "discriminator.keras"))
    return directory


__all__ = ["make_pretrained_dir", "make_trial_dir", "make_serving_pretrained_dir", "SERVING_VOCAB"]
