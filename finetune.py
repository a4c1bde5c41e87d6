"""Fine-tune a pre-trained ELECTRA discriminator on GLUE, SQuAD or your own data.

    python finetune.py --helpshort

The command lives in `electra_tf/commands/finetune.py` (its docstring has
examples); the package also installs it as `electra-finetune`.
"""

import os

if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ start-up noise
    from electra_tf.commands.finetune import run

    run()
