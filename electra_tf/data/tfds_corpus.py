"""Pre-training text from a prepared TensorFlow Datasets corpus (`--corpus=tfds:NAME...`).

    --corpus=tfds:wikipedia/20230601.en:train   --tfds_text_key=text
    --corpus=tfds:wiki40b/ko                    (split: train)
    --corpus=tfds:c4/en:validation[:10%]

The split is written once to a plain text file in the corpus format every
other corpus uses (a line per paragraph, a blank line between documents), so
the vocabulary learner, the shard builder and their caches treat it like any
file. Each example's text is one document; its line breaks separate
paragraphs and its blank lines are dropped (a blank line would end the
document). Nothing is downloaded: the dataset must already be prepared
(`tfds.builder(NAME).download_and_prepare()`, or any directory holding a
prepared dataset under `--tfds_data_dir`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Callable, Optional

PREFIX = "tfds:"
_SPEC = re.compile(r"^(?P<name>[\w.-]+)(?:/(?P<config>[\w.+-]+))?(?::(?P<split>.+))?$")


class TfdsCorpusError(ValueError):
    """The TFDS corpus cannot be read; the message names the dataset and what to do."""


@dataclasses.dataclass(frozen=True)
class TfdsCorpus:
    """A parsed `tfds:NAME[/CONFIG][:SPLIT]` corpus reference."""

    name: str
    config: Optional[str]
    split: str

    @property
    def builder_name(self) -> str:
        return f"{self.name}/{self.config}" if self.config else self.name

    def __str__(self) -> str:
        return f"{PREFIX}{self.builder_name}:{self.split}"


def is_tfds_corpus(value: str) -> bool:
    return value.startswith(PREFIX)


def parse(value: str) -> TfdsCorpus:
    """Parses `tfds:NAME[/CONFIG][:SPLIT]` (split default `train`).

    Raises:
        TfdsCorpusError: the reference is malformed.
    """
    match = _SPEC.match(value[len(PREFIX) :] if is_tfds_corpus(value) else value)
    if not match:
        raise TfdsCorpusError(
            f"--corpus={value}: expected tfds:NAME[/CONFIG][:SPLIT], e.g. tfds:wiki40b/en:train."
        )
    return TfdsCorpus(match["name"], match["config"], match["split"] or "train")


def _builder(corpus: TfdsCorpus, data_dir: Optional[str]):
    """The prepared dataset's builder: a registered one, else read from its directory."""
    import tensorflow_datasets as tfds

    where = data_dir or "the default TFDS directory"
    hint = (
        f"Prepare it once with tfds.builder('{corpus.builder_name}').download_and_prepare()"
        " (and pass --tfds_data_dir if it is not in the default place)."
    )
    try:
        builder = tfds.builder(corpus.builder_name, data_dir=data_dir)
    except tfds.core.registered.DatasetNotFoundError:
        # Not a dataset this TFDS knows by name: a prepared directory is enough.
        root = os.path.join(
            data_dir or os.path.expanduser("~/tensorflow_datasets"),
            corpus.name,
            *([corpus.config] if corpus.config else []),
        )
        versions = (
            sorted(
                (
                    v
                    for v in os.listdir(root)
                    if os.path.isfile(os.path.join(root, v, "dataset_info.json"))
                ),
                key=lambda v: [int(p) if p.isdigit() else p for p in v.split(".")],
            )
            if os.path.isdir(root)
            else []
        )
        if not versions:
            raise TfdsCorpusError(
                f"--corpus={corpus}: no dataset {corpus.builder_name!r} is "
                f"prepared in {where}. {hint}"
            ) from None
        builder = tfds.builder_from_directory(os.path.join(root, versions[-1]))
    except (ValueError, AssertionError) as error:
        raise TfdsCorpusError(f"--corpus={corpus}: {error}") from None
    if not builder.is_prepared():
        raise TfdsCorpusError(
            f"--corpus={corpus}: TFDS dataset {corpus.builder_name} is not "
            f"prepared in {where}. {hint}"
        )
    return builder


def _document_lines(text: str) -> list:
    """A document's non-blank lines, each stripped (a blank line would end the document)."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def export_text(
    corpus: TfdsCorpus,
    output_path: str,
    text_key: str = "text",
    data_dir: Optional[str] = None,
    progress: Callable[[str], None] = lambda message: None,
) -> dict:
    """Writes the split's documents to `output_path` once (reused while the dataset is unchanged).

    Args:
        corpus: the parsed reference.
        output_path: the text file to write (atomically).
        text_key: the feature holding each example's text.
        data_dir: where the dataset is prepared (None: TFDS's default).
        progress: called with short status lines.

    Returns:
        Metadata: dataset, version, split, documents, lines, bytes.

    Raises:
        TfdsCorpusError: the dataset is not prepared, the split or key does not exist.
    """
    import tensorflow_datasets as tfds

    builder = _builder(corpus, data_dir)
    info = builder.info
    source = {
        "dataset": corpus.builder_name,
        "version": str(info.version),
        "split": corpus.split,
        "text_key": text_key,
        "data_dir": os.path.abspath(builder.data_dir),
    }
    meta_path = output_path + ".json"
    if os.path.exists(output_path) and os.path.exists(meta_path):
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
        if meta.get("source") == source:
            return meta
    if text_key not in info.features:
        raise TfdsCorpusError(
            f"--tfds_text_key={text_key}: {corpus.builder_name} has no feature {text_key!r}; "
            f"its features are {', '.join(sorted(info.features))}."
        )
    try:
        dataset = builder.as_dataset(split=corpus.split)
    except (ValueError, KeyError) as error:
        raise TfdsCorpusError(
            f"--corpus={corpus}: split {corpus.split!r}: {error} "
            f"(splits: {', '.join(sorted(info.splits))})."
        ) from None
    progress(f"Writing the text of {corpus} ({info.version}) to {output_path} ...")
    os.makedirs(os.path.dirname(os.path.abspath(output_path)), exist_ok=True)
    tmp = f"{output_path}.tmp-{os.getpid()}"
    documents = lines = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for example in tfds.as_numpy(dataset):
            text = example[text_key]
            paragraphs = _document_lines(
                text.decode("utf-8", errors="replace") if isinstance(text, bytes) else str(text)
            )
            if not paragraphs:
                continue
            if documents:
                f.write("\n")  # the blank line between documents
            f.write("\n".join(paragraphs) + "\n")
            documents += 1
            lines += len(paragraphs)
    if not documents:
        os.remove(tmp)
        raise TfdsCorpusError(f"--corpus={corpus}: the split holds no text under {text_key!r}.")
    os.replace(tmp, output_path)
    meta = {
        "source": source,
        "documents": documents,
        "lines": lines,
        "bytes": os.path.getsize(output_path),
    }
    with open(meta_path, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
    progress(f"{corpus}: {documents:,} documents, {meta['bytes'] / 1e6:.1f} MB of text.")
    return meta
