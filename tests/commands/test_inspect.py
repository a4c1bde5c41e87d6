import os

import keras
import numpy as np
import pytest
from finetuning_support import VOCAB, write_vocab

from electra_tf import inspect as inspect_library
from electra_tf.commands import inspect as inspect_command
from electra_tf.config import preset
from electra_tf.modeling.electra import build_generator_and_discriminator


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    """An export/ directory with a tiny generator and discriminator (random weights)."""
    directory = str(tmp_path_factory.mktemp("run") / "export")
    os.makedirs(directory)
    write_vocab(os.path.join(directory, "vocab.txt"))
    config = preset(
        "tiny",
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_layers=2,
        embedding_size=16,
        num_heads=2,
        intermediate_size=64,
        max_seq_length=16,
        mask_rate=0.3,
    )
    config.save_json(os.path.join(directory, "config.json"))
    keras.utils.set_random_seed(0)
    generator, discriminator = build_generator_and_discriminator(config.model)
    generator.save(os.path.join(directory, "generator.keras"))
    discriminator.save(os.path.join(directory, "discriminator.keras"))
    return directory


def discriminator_probabilities(export_dir, ids, mask):
    disc = keras.saving.load_model(os.path.join(export_dir, "discriminator.keras"))
    logits = disc(
        {"input_ids": ids[None], "input_mask": mask[None], "segment_ids": np.zeros_like(ids)[None]}
    )["logits"].numpy()[0]
    return 1 / (1 + np.exp(-logits.astype(np.float64)))


def test_generator_replacements_and_every_token_scored(export_dir):
    text = "the movie was good the actor was very fun"
    samples, vocab, _ = inspect_library.inspect_texts(export_dir, [text], seed=3)
    sample = samples[0]
    n = int(sample["input_mask"].sum())
    words = text.split()
    assert n == len(words) + 2  # [CLS] text [SEP]: every word is in the toy vocabulary
    assert [vocab[i] for i in sample["input_ids"][1 : n - 1]] == words
    masked = np.flatnonzero(sample["masked"])
    assert len(masked) == round(0.3 * n) and 0 not in masked and n - 1 not in masked
    changed = np.flatnonzero(sample["fake_ids"] != sample["input_ids"])
    assert set(changed) <= set(masked)
    np.testing.assert_array_equal(sample["labels"] > 0, sample["fake_ids"] != sample["input_ids"])
    np.testing.assert_allclose(
        sample["probabilities"],
        discriminator_probabilities(export_dir, sample["fake_ids"], sample["input_mask"]),
        rtol=1e-5,
    )
    # The same seed gives the same draws.
    again, _, _ = inspect_library.inspect_texts(export_dir, [text], seed=3)
    np.testing.assert_array_equal(again[0]["fake_ids"], sample["fake_ids"])


def test_command_scores_text_as_given_and_writes_html(export_dir, tmp_path, capsys):
    page = tmp_path / "view.html"
    assert (
        inspect_command.main(
            [export_dir, "the movie was fun", "--no_replace", "--color=never", f"--html={page}"]
        )
        == 0
    )
    output = capsys.readouterr().out
    line = next(x for x in output.splitlines() if x.startswith("[CLS]"))
    assert line.split()[1].startswith("the") and "(was" not in line
    html = page.read_text()
    assert "the movie was fun" in html and html.count('class="t"') == 6
    samples, _, _ = inspect_library.inspect_texts(export_dir, ["the movie was fun"], replace=False)
    np.testing.assert_array_equal(samples[0]["fake_ids"], samples[0]["input_ids"])


def test_missing_run_is_named(tmp_path, capsys):
    assert inspect_command.main([str(tmp_path / "nowhere"), "text"]) == 2
    assert "nowhere: no such run" in capsys.readouterr().err
