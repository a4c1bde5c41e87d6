"""Every user command, one module each, on absl flags: `python -m electra_tf.commands.<name>`.

`pretrain` and `finetune` are also `pretrain.py` / `finetune.py` at the
repository root and the installed `electra-pretrain` / `electra-finetune`.
"""
