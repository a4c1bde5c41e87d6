"""A silver NER task from Wikipedia text: mentions of each article's title in its body.

    python -m electra_tf.commands.title_mentions --corpus kowiki_sample.txt \\
        --output_dir silver/ [--baselines]

Writes train.txt and dev.txt (CoNLL, `word tag`) and stats.json to
--output_dir; see `electra_tf.finetuning.tagging.title_mentions` for how sentences
are chosen and tagged.
"""

from __future__ import annotations

import json
import os
from collections import Counter

from absl import app, flags

from electra_tf import cli
from electra_tf.finetuning.tagging import title_mentions


def define_flags(flag_values: flags.FlagValues) -> None:
    """The command's flags."""
    flags.DEFINE_string("corpus", None, "Text in the pre-training layout.", flag_values=flag_values)
    flags.DEFINE_string(
        "output_dir", None, "Receives train.txt, dev.txt and stats.json.", flag_values=flag_values
    )
    flags.DEFINE_integer("dev_every", 10, "Every n-th article is dev.", flag_values=flag_values)
    flags.DEFINE_integer("max_sentences", 6, "Sentences per article.", flag_values=flag_values)
    flags.DEFINE_integer("max_words", 48, "Longer sentences are skipped.", flag_values=flag_values)
    flags.DEFINE_integer(
        "max_articles",
        None,
        "Read at most this many articles (default: all).",
        flag_values=flag_values,
    )
    flags.DEFINE_boolean(
        "baselines",
        False,
        "Print the dev scores of the all-O and dictionary baselines.",
        flag_values=flag_values,
    )
    flags.mark_flags_as_required(["corpus", "output_dir"], flag_values=flag_values)


def build_task(arguments: list[str], flag_values: flags.FlagValues) -> int:
    """Writes the task; prints its statistics; returns the exit code."""
    if arguments:
        raise app.UsageError(f"unexpected arguments: {' '.join(arguments)}")
    if not os.path.isfile(flag_values.corpus):
        raise app.UsageError(f"--corpus={flag_values.corpus}: no such file.")
    if flag_values.dev_every < 2 or flag_values.max_sentences < 1:
        raise app.UsageError("--dev_every must be >= 2 and --max_sentences >= 1.")
    splits = title_mentions.build(
        flag_values.corpus,
        flag_values.dev_every,
        flag_values.max_sentences,
        flag_values.max_words,
        flag_values.max_articles,
    )
    os.makedirs(flag_values.output_dir, exist_ok=True)
    stats = {}
    for name, sentences in splits.items():
        title_mentions.write_conll(os.path.join(flag_values.output_dir, f"{name}.txt"), sentences)
        mentions = Counter(t[2:] for _, tags in sentences for t in tags if t.startswith("B-"))
        stats[name] = {
            "sentences": len(sentences),
            "words": sum(len(w) for w, _ in sentences),
            "sentences_with_mentions": sum(
                any(t != title_mentions.OUTSIDE for t in tags) for _, tags in sentences
            ),
            "mentions": dict(sorted(mentions.items())),
        }
    if flag_values.baselines:
        stats["dev_baselines"] = title_mentions.baselines(splits)
    with open(os.path.join(flag_values.output_dir, "stats.json"), "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(json.dumps(stats, indent=2, ensure_ascii=False))
    return 0


def main(argv: list[str]) -> int:
    """Runs the command in this process on `argv` (no program name); returns the exit code."""
    return cli.call(define_flags, build_task, argv, "python -m electra_tf.commands.title_mentions")


if __name__ == "__main__":
    cli.run_command(define_flags, build_task, __name__)
