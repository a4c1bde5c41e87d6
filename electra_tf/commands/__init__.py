"""Every user command, one module each, on absl flags: `python -m electra_tf.commands.<name>`.

Each is also `python -m electra_tf <name>` and the installed `electra-tf <name>`
(`electra_tf/__main__.py`, which lists them with the first line of their
docstrings). `pretrain` and `finetune` are also `pretrain.py` / `finetune.py`
at the repository root and the installed `electra-pretrain` / `electra-finetune`.
"""
