"""Pre-train ELECTRA: text -> WordPiece vocab -> TFRecord shards -> generator + discriminator.

    python pretrain.py --model_size=small                      # built-in demo corpus, short run
    python pretrain.py --model_size=small --corpus='wiki/*.txt' # the paper's recipe on your text

Without --corpus the run uses the documentation text of the installed Python
packages (found offline on any machine with the requirements installed) and a
shortened schedule, announced at start. Vocabularies and shards are cached
under data/ and reused; runs go to runs/<name>/ (config, checkpoints,
TensorBoard logs, export). Re-running the same command resumes.
"""

import os

if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ start-up noise
    from electra_tf.huge_pages import use_huge_page_malloc

    use_huge_page_malloc()  # only with ELECTRA_TF_HUGE_PAGES=1: re-executes this process

    from electra_tf.commands.pretrain import run

    run()
