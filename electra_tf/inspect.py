"""What the discriminator sees: replacements and P(replaced) on every token of a text.

The text is tokenized as pre-training tokenized it, a fraction of its
tokens are masked by ELECTRA's rules and the generator fills them with
samples (at the run's temperature); the discriminator then scores every
token. Without replacement the text is scored as given, to see which of
your own edits the discriminator flags. The command line around it is
`python -m electra_tf.commands.inspect`.

Accepts a pre-training run directory (its export, else its latest
checkpoint) or its `export/` directory.
"""

from __future__ import annotations


def inspect_texts(
    path: str, texts: list, *, replace: bool = True, mask_rate=None, seed: int = 0
) -> tuple:
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
    tokenizer = WordPieceTokenizer(
        vocab_file, config.do_lower_case, config.resolved_strip_accents, config.normalization
    )
    notes = [f"weights: {where}"]
    if replace and generator is None:
        notes.append(
            "this run has no generator (MLM objective or uniform generator): the text "
            "is scored as given"
        )
        replace = False
    length = config.max_seq_length
    slots = config.resolved_max_predictions_per_seq
    samples = []
    for index, text in enumerate(texts):
        pieces = tokenizer.tokenize_to_lists([text])[0][: length - 2]
        ids = np.zeros(length, np.int32)
        ids[: len(pieces) + 2] = [tokenizer.cls_id, *pieces, tokenizer.sep_id]
        mask = (np.arange(length) < len(pieces) + 2).astype(np.int32)
        segments = np.zeros(length, np.int32)
        fake, masked = ids.copy(), np.zeros(length, np.int32)
        if replace:
            m = mask_example(
                ids,
                mask,
                tf.constant([seed, index], tf.int64),
                mask_rate=mask_rate or config.mask_rate,
                max_predictions_per_seq=slots,
                **{k: tokenizer.special_ids[k] for k in ("pad_id", "cls_id", "sep_id", "mask_id")},
            )
            m = {k: v.numpy() for k, v in m.items()}
            logits = generator(
                {
                    "input_ids": m["masked_input_ids"][None],
                    "input_mask": mask[None],
                    "segment_ids": segments[None],
                    "masked_lm_positions": m["masked_lm_positions"][None],
                }
            )
            sampled = objective.sample_tokens(
                logits, m["sampling_uniforms"][None], config.temperature
            )
            fake_t, _ = objective.replace_tokens(
                ids[None], m["masked_lm_positions"][None], sampled, m["masked_lm_weights"][None]
            )
            fake = fake_t.numpy()[0]
            masked[m["masked_lm_positions"][m["masked_lm_weights"] > 0]] = 1
        out = discriminator(
            {"input_ids": fake[None], "input_mask": mask[None], "segment_ids": segments[None]}
        )
        logits = tf.cast(out["logits"], tf.float32).numpy()[0]
        samples.append(
            {
                "input_ids": ids,
                "fake_ids": fake,
                "input_mask": mask,
                "masked": masked,
                "labels": (fake != ids).astype(np.int32),
                "probabilities": 1.0 / (1.0 + np.exp(-logits.astype(np.float64))),
            }
        )
    return samples, tokenizer.vocab, notes
