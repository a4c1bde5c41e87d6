"""A silver NER task from Wikipedia text: mentions of each article's title in its body.

    python -m electra_tf.commands.title_mentions --corpus kowiki_sample.txt \\
        --output_dir silver/ [--baselines]

Writes train.txt and dev.txt (CoNLL, `word tag`) and stats.json to
--output_dir; see `electra_tf.finetuning.tagging.title_mentions` for how sentences
are chosen and tagged.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter
from typing import Optional

from absl import app, flags

from electra_tf import cli
from electra_tf.config import flag_field
from electra_tf.finetuning.tagging import title_mentions


@dataclasses.dataclass
class TitleMentionsOptions:
    """The command's flags."""

    corpus: Optional[str] = flag_field(None, "Text in the pre-training layout.", required=True)
    output_dir: Optional[str] = flag_field(
        None, "Receives train.txt, dev.txt and stats.json.", required=True
    )
    dev_every: int = flag_field(10, "Every n-th article is dev.")
    max_sentences: int = flag_field(6, "Sentences per article.")
    max_words: int = flag_field(48, "Longer sentences are skipped.")
    max_articles: Optional[int] = flag_field(
        None, "Read at most this many articles (default: all)."
    )
    baselines: bool = flag_field(
        False, "Print the dev scores of the all-O and dictionary baselines."
    )


def define_flags(flag_values: flags.FlagValues) -> None:
    """The command's flags."""
    cli.define_option_flags(TitleMentionsOptions, flag_values)


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
