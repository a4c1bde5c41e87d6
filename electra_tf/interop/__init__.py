"""Moving weights between electra-tf and other ELECTRA implementations.

* `weight_names`: every variable of our generator/discriminator under the
  original TF1 code's name (the canonical form used here), and the rule that
  turns those names into Hugging Face `transformers` state-dict keys.
* `tf1`: reading google-research/electra checkpoints.
* `huggingface`: reading and writing `config.json` + `model.safetensors` dirs.
* `keras_hub_preset`: keras-hub `ElectraBackbone` presets, written and read
  with keras-hub's own code (imported only there); `keras_hub_fidelity`: what
  of our model and casing survives there, and the checks an export prints.
* `checkpoints`: any supported checkpoint -> a config plus canonical weights,
  and those weights -> our models or a run directory.
"""
