"""Pre-train ELECTRA on a text corpus (or the built-in demo) and export the discriminator.

    python pretrain.py --helpshort

The command lives in `electra_tf/commands/pretrain.py` (its docstring has
examples); the package also installs it as `electra-pretrain`.
"""

import os

if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ start-up noise
    from electra_tf.commands.pretrain import run

    run()
