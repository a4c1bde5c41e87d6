"""One worker of a MultiWorkerMirroredStrategy pre-training run (test scaffolding).

    TF_CONFIG=... python multi_worker_support.py <shard_dir> <vocab> <run_dir> <weights.npz>

Trains the tiny configuration of tests/test_pretraining_loop.py with dropout off
and writes this worker's final trainable weights to <weights.npz>.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(shard_dir, vocab, run_dir, weights_file):
    from electra_tf.distribute import create_strategy

    # The collective runtime is configured when the strategy is created, so
    # it must exist before any other TensorFlow work.
    strategy = create_strategy("multi_worker")

    import keras
    import numpy as np

    from electra_tf.tokenization import WordPieceTokenizer
    from electra_tf.training.pretraining_loop import run_pretraining

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from test_pretraining_loop import tiny

    class DumpWeights(keras.callbacks.Callback):
        def on_train_end(self, logs=None):
            np.savez(weights_file, *[v.numpy() for v in self.model.trainable_variables])

    tokenizer = WordPieceTokenizer(vocab, do_lower_case=True)
    result = run_pretraining(tiny(**SETTINGS), run_dir, shard_dir, vocab, tokenizer.special_ids,
                             strategy=strategy, extra_callbacks=[DumpWeights()])
    assert result.finished


# Shared with the single-process reference run of the test.
SETTINGS = dict(dropout_rate=0.0, attention_dropout_rate=0.0, num_train_steps=4,
                save_checkpoints_steps=2, keep_checkpoint_max=0)

if __name__ == "__main__":
    main(*sys.argv[1:5])
