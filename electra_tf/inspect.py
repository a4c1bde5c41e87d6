"""See what the discriminator sees: replacements and P(replaced) on every token of your text.

    python -m electra_tf.inspect runs/small-builtin "The cat sat on the mat."
    python -m electra_tf.inspect runs/small-builtin/export "text one" "text two" --html view.html
    python -m electra_tf.inspect runs/small-builtin "The cat ate on the mat." --no_replace

The text is tokenized as pre-training tokenized it, `--mask_rate` of its
tokens are masked by ELECTRA's rules and the generator fills them with
samples (at the run's temperature); the discriminator then scores every
token. `--no_replace` skips the generator: the text is scored as given, to
see which of your own edits the discriminator flags. Terminal output is
coloured (white to red with the probability) when it is a terminal;
`--html` writes a page.

Accepts a pre-training run directory (its export, else its latest
checkpoint) or its `export/` directory.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def inspect_texts(path: str, texts: list, *, replace: bool = True, mask_rate=None,
                  seed: int = 0) -> tuple:
    """Runs the generator (optionally) and the discriminator over `texts`.

    Args:
        path: a pre-training run directory or its export/ directory.
        texts: strings; each is one sequence `[CLS] text [SEP]`, truncated to
            the run's `max_seq_length`.
        replace: mask and let the generator replace tokens first.
        mask_rate: fraction of tokens masked (default: the run's).
        seed: masking and sampling seed (the same seed gives the same draws).

    Returns:
        (list of sample dicts for `display.annotate`, vocabulary list, notes).
    """
    import numpy as np
    import tensorflow as tf

    from electra_tf.artifacts.pretrained import locate_pretrained
    from electra_tf.data.masking import mask_example
    from electra_tf.interop.checkpoints import load_run_models
    from electra_tf.pretraining import objective
    from electra_tf.tokenization import WordPieceTokenizer

    config, generator, discriminator, where = load_run_models(path)
    vocab_file = locate_pretrained(path).vocab_file
    if vocab_file is None:
        raise FileNotFoundError(f"{path}: no vocab.txt in the run or its export/.")
    tokenizer = WordPieceTokenizer(vocab_file, config.do_lower_case, config.resolved_strip_accents,
                                   config.normalization)
    notes = [f"weights: {where}"]
    if replace and generator is None:
        notes.append("this run has no generator (MLM objective or uniform generator): the text "
                     "is scored as given")
        replace = False
    length = config.max_seq_length
    slots = config.resolved_max_predictions_per_seq
    samples = []
    for index, text in enumerate(texts):
        pieces = tokenizer.tokenize_to_lists([text])[0][:length - 2]
        ids = np.zeros(length, np.int32)
        ids[:len(pieces) + 2] = [tokenizer.cls_id, *pieces, tokenizer.sep_id]
        mask = (np.arange(length) < len(pieces) + 2).astype(np.int32)
        segments = np.zeros(length, np.int32)
        fake, masked = ids.copy(), np.zeros(length, np.int32)
        if replace:
            m = mask_example(ids, mask, tf.constant([seed, index], tf.int64),
                             mask_rate=mask_rate or config.mask_rate,
                             max_predictions_per_seq=slots,
                             **{k: tokenizer.special_ids[k]
                                for k in ("pad_id", "cls_id", "sep_id", "mask_id")})
            m = {k: v.numpy() for k, v in m.items()}
            logits = generator({"input_ids": m["masked_input_ids"][None],
                                "input_mask": mask[None], "segment_ids": segments[None],
                                "masked_lm_positions": m["masked_lm_positions"][None]})
            sampled = objective.sample_tokens(logits, m["sampling_uniforms"][None],
                                              config.temperature)
            fake_t, _ = objective.replace_tokens(ids[None], m["masked_lm_positions"][None],
                                                 sampled, m["masked_lm_weights"][None])
            fake = fake_t.numpy()[0]
            masked[m["masked_lm_positions"][m["masked_lm_weights"] > 0]] = 1
        out = discriminator({"input_ids": fake[None], "input_mask": mask[None],
                             "segment_ids": segments[None]})
        logits = tf.cast(out["logits"], tf.float32).numpy()[0]
        samples.append({"input_ids": ids, "fake_ids": fake, "input_mask": mask,
                        "masked": masked, "labels": (fake != ids).astype(np.int32),
                        "probabilities": 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))})
    return samples, tokenizer.vocab, notes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m electra_tf.inspect",
        description="Show the generator's replacements and the discriminator's P(replaced) on "
                    "every token of your text.")
    parser.add_argument("run", help="pre-training run directory or its export/ directory")
    parser.add_argument("texts", nargs="+", help="texts to score (one sequence each)")
    parser.add_argument("--no_replace", action="store_true",
                        help="score the text as given (no masking, no generator)")
    parser.add_argument("--mask_rate", type=float, default=None,
                        help="fraction of tokens the generator replaces (default: the run's)")
    parser.add_argument("--seed", type=int, default=0, help="masking and sampling seed")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the terminal output (auto: when it is a terminal)")
    parser.add_argument("--html", default=None, help="also write an HTML page to this file")
    args = parser.parse_args(argv)
    if args.mask_rate is not None and not 0.0 < args.mask_rate < 1.0:
        parser.error(f"--mask_rate={args.mask_rate}: must be in (0, 1).")
    if not os.path.exists(args.run):
        parser.error(f"{args.run}: no such run or export directory.")

    from electra_tf.interop.checkpoints import CheckpointError
    from electra_tf.pretraining import display

    try:
        samples, vocab, notes = inspect_texts(args.run, args.texts, replace=not args.no_replace,
                                              mask_rate=args.mask_rate, seed=args.seed)
    except (CheckpointError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    for note in notes:
        print(f"({note})")
    print(display.LEGEND)
    sections = []
    for text, sample in zip(args.texts, samples):
        tokens = display.annotate(sample, vocab)
        print()
        print(display.to_ansi(tokens) if colour else display.to_plain(tokens))
        sections.append((text, display.to_html(tokens)))
    if args.html:
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(display.html_page(sections))
        print(f"\nHTML: {args.html}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
