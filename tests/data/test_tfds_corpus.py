"""Pre-training text from a TFDS dataset the test prepares itself (nothing is downloaded)."""

import os
import subprocess
import sys

import pytest
import tensorflow_datasets as tfds

from electra_tf.data import tfds_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORDS = "the cat sat on a mat and the dog ran to the park".split()


def document(i):
    """Document i: two paragraphs (and a blank line between them, which must vanish)."""
    first = " ".join(WORDS[i % len(WORDS) :] + WORDS[: i % len(WORDS)])
    return f"{first}\n\n  {' '.join(reversed(WORDS))} .  \n"


class ElectraTfToyCorpus(tfds.core.GeneratorBasedBuilder):
    """Eight short documents: six in train, two in validation."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.FeaturesDict(
                {"text": tfds.features.Text(), "title": tfds.features.Text()}
            ),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(0, 6), "validation": self._generate_examples(6, 8)}

    def _generate_examples(self, start, end):
        for i in range(start, end):
            yield i, {"text": document(i), "title": f"doc {i}"}


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("tfds"))
    ElectraTfToyCorpus(data_dir=directory).download_and_prepare()
    return directory


def test_parse():
    assert tfds_corpus.parse("tfds:wiki40b/en:validation[:10%]") == tfds_corpus.TfdsCorpus(
        "wiki40b", "en", "validation[:10%]"
    )
    assert tfds_corpus.parse("tfds:c4").split == "train"
    with pytest.raises(tfds_corpus.TfdsCorpusError, match="tfds:NAME"):
        tfds_corpus.parse("tfds:")


def test_export_writes_documents_in_the_corpus_format_once(tfds_dir, tmp_path):
    path = str(tmp_path / "corpus.txt")
    corpus = tfds_corpus.parse("tfds:electra_tf_toy_corpus:validation")
    meta = tfds_corpus.export_text(corpus, path, data_dir=tfds_dir)
    text = open(path, encoding="utf-8").read()
    # One document per example, a line per paragraph, the inner blank line and spaces gone.
    expected = [
        document(i).splitlines()[0] + "\n" + " ".join(reversed(WORDS)) + " ." for i in (6, 7)
    ]
    assert text.endswith("\n") and sorted(text.strip().split("\n\n")) == sorted(expected)
    assert meta["documents"] == 2 and meta["lines"] == 4
    mtime = os.path.getmtime(path)
    assert tfds_corpus.export_text(corpus, path, data_dir=tfds_dir) == meta
    assert os.path.getmtime(path) == mtime  # reused, not rewritten


def test_missing_dataset_split_and_key_are_named(tfds_dir, tmp_path):
    with pytest.raises(tfds_corpus.TfdsCorpusError, match="not prepared|no dataset"):
        tfds_corpus.export_text(
            tfds_corpus.parse("tfds:electra_tf_no_such_corpus"),
            str(tmp_path / "a.txt"),
            data_dir=tfds_dir,
        )
    with pytest.raises(tfds_corpus.TfdsCorpusError, match="--tfds_text_key=body.*text, title"):
        tfds_corpus.export_text(
            tfds_corpus.parse("tfds:electra_tf_toy_corpus"),
            str(tmp_path / "b.txt"),
            text_key="body",
            data_dir=tfds_dir,
        )
    with pytest.raises(tfds_corpus.TfdsCorpusError, match="split 'test'"):
        tfds_corpus.export_text(
            tfds_corpus.parse("tfds:electra_tf_toy_corpus:test"),
            str(tmp_path / "c.txt"),
            data_dir=tfds_dir,
        )


@pytest.mark.slow
def test_pretrain_reads_a_tfds_corpus(tfds_dir, tmp_path):
    # A fresh process has never seen the builder class: the prepared directory is enough.
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *sorted(set(WORDS))])
    )
    run = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "pretrain.py"),
            "--corpus=tfds:electra_tf_toy_corpus",
            "--eval_corpus=tfds:electra_tf_toy_corpus:validation",
            f"--tfds_data_dir={tfds_dir}",
            f"--vocab_file={vocab}",
            f"--data_dir={tmp_path}/data",
            f"--output_dir={tmp_path}/run",
            "--model_size=tiny",
            "--hidden_size=32",
            "--num_layers=1",
            "--embedding_size=16",
            "--num_heads=2",
            "--max_seq_length=16",
            "--train_batch_size=4",
            "--num_train_steps=1",
            "--num_warmup_steps=1",
            "--log_every_steps=1",
            "--num_shard_workers=1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "tfds:electra_tf_toy_corpus:train: 6 documents" in output
    assert "Held-out evaluation at step 1" in output
    assert os.path.exists(tmp_path / "data" / "tfds" / "electra_tf_toy_corpus-train.txt")
