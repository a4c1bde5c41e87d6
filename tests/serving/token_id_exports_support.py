"""Trial directories of every task kind, for the ONNX and LiteRT export tests."""

import glob
import os

import numpy as np

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(PROJECT, "tests", "fixtures", "finetuned")


def fixture_trial(name: str) -> str:
    """The trial directory of a fine-tuned fixture (classifier, question_answering, tagger)."""
    (model_json,) = glob.glob(
        os.path.join(FIXTURES, name, "run", "**", "model.json"), recursive=True
    )
    return os.path.dirname(model_json)


def kind_trial(directory: str, kind: str) -> str:
    """A multiple-choice or dependency-parsing trial over a tiny encoder, with a random head."""
    from serving_support import make_serving_pretrained_dir

    from electra_tf.artifacts.pretrained import load_discriminator
    from electra_tf.finetuning.saving import save_finetuned

    pretrained = make_serving_pretrained_dir(os.path.join(directory, "pretrained"))
    encoder = load_discriminator(pretrained).encoder
    info = {"max_seq_length": 12, "do_lower_case": True, "strip_accents": True}
    if kind == "multiple_choice":
        from electra_tf.finetuning.multiple_choice.model import build_multiple_choice

        model = build_multiple_choice(encoder, seed=4)
        info.update(kind=kind, task={"name": "toymc"})
    else:
        from electra_tf.finetuning.dependency_parsing.data import ParsingDefinition
        from electra_tf.finetuning.dependency_parsing.model import build_parser

        model = build_parser(encoder, 38, seed=2)
        info.update(kind=kind, task=ParsingDefinition("toydp").to_dict())
    rng = np.random.default_rng(4)
    for variable in model.task_head.weights:
        variable.assign(rng.normal(0, 1.0, variable.shape).astype(np.float32))
    trial = os.path.join(directory, "trial_0")
    save_finetuned(model, trial, info, os.path.join(pretrained, "vocab.txt"))
    return trial
