"""The command lines: `pretrain.py` and `finetune.py` (also `electra-pretrain`, `electra-finetune`)."""
