"""Lays out sample files of KoELECTRA's tasks as its finetune/data/ expects, each split in two.

    python -m tools.koelectra_samples SAMPLES_DIR NSMC_FILE DATA_DIR [--train_rows=200] \\
        [--max_scored_rows=1000]

SAMPLES_DIR holds one file per task folder (`naver-ner/test.tsv`,
`korsts/sts-dev.tsv`, ...: the first lines of a file KoELECTRA distributes,
with its header where it has one); NSMC_FILE is NSMC's `ratings_test.txt`.
Each file is cut in two, rows in file order, the header (every task's
first line but Naver NER's, which has none) copied to both parts:

* its first `--train_rows` rows become the task's training file
  (`nsmc/ratings_train.txt`, `naver-ner/train.tsv`, `paws/translated_train.tsv`, ...);
* the rows after them, at most `--max_scored_rows`, become the file the
  suite scores (`nsmc/ratings_test.txt`, `naver-ner/test.tsv`,
  `paws/test_2k.tsv`, `hate-speech/val.tsv`, ...).

Nothing else is written, so a task's other evaluation file (PAWS's
`dev_2k.tsv`, ...) is absent and the suite says so. A row is a line: none
of these files has a line break inside a field.
"""

from __future__ import annotations

import os
import sys

from absl import app, flags

flags.DEFINE_integer("train_rows", 200, "Rows of each file that become the training file.")
flags.DEFINE_integer(
    "max_scored_rows", 1000, "Rows after them that become the scored file (at most)."
)
FLAGS = flags.FLAGS


def split_file(
    source: str, train: str, scored: str, has_header: bool, train_rows: int, max_scored_rows: int
) -> tuple[int, int]:
    """Writes the first `train_rows` rows of `source` to `train`, the next ones to `scored`.

    Returns:
        (training rows, scored rows) written.
    """
    with open(source, encoding="utf-8", newline="") as f:
        lines = f.read().splitlines(keepends=True)
    header = lines[:1] if has_header else []
    rows = lines[len(header) :]
    parts = ((train, rows[:train_rows]), (scored, rows[train_rows : train_rows + max_scored_rows]))
    for path, part in parts:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.writelines(header + part)
    return len(parts[0][1]), len(parts[1][1])


def lay_out(
    samples_dir: str,
    nsmc_file: str,
    data_dir: str,
    train_rows: int,
    max_scored_rows: int,
    print_fn=print,
) -> dict:
    """Splits every sample found into its task's training and scored files under `data_dir`.

    Returns:
        {task: (training rows, scored rows)}.
    """
    from electra_tf.finetuning.benchmarks.koelectra import KOELECTRA
    from electra_tf.finetuning.kind.benchmark import TRAIN
    from electra_tf.finetuning.tagging.data import TAGGING

    counts = {}
    for benchmark in KOELECTRA.tasks:
        if benchmark.name == "nsmc":
            source = nsmc_file
        else:
            folder = os.path.join(samples_dir, benchmark.directory)
            names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
            if len(names) != 1:
                print_fn(f"{benchmark.name}: no single sample file in {folder}; left out")
                continue
            source = os.path.join(folder, names[0])
        target = os.path.join(data_dir, benchmark.directory)
        counts[benchmark.name] = split_file(
            source,
            os.path.join(target, benchmark.files[TRAIN]),
            os.path.join(target, benchmark.files[benchmark.scored_split]),
            has_header=benchmark.kind != TAGGING,
            train_rows=train_rows,
            max_scored_rows=max_scored_rows,
        )
        print_fn(
            f"{benchmark.name}: {source} -> {benchmark.files[TRAIN]} "
            f"({counts[benchmark.name][0]} rows), {benchmark.files[benchmark.scored_split]} "
            f"({counts[benchmark.name][1]} rows)"
        )
    return counts


def main(argv):
    if len(argv) != 4:
        raise app.UsageError("expected SAMPLES_DIR NSMC_FILE DATA_DIR")
    samples_dir, nsmc_file, data_dir = argv[1:]
    if not os.path.isdir(samples_dir):
        print(f"error: SAMPLES_DIR {samples_dir} is not a directory", file=sys.stderr)
        return 2
    if not os.path.isfile(nsmc_file):
        print(
            f"error: NSMC_FILE {nsmc_file} is not a file (NSMC's ratings_test.txt)", file=sys.stderr
        )
        return 2
    try:
        lay_out(samples_dir, nsmc_file, data_dir, FLAGS.train_rows, FLAGS.max_scored_rows)
    except (OSError, UnicodeDecodeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(app.run(main))
