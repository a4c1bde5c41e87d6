"""Moving weights between electra-tf and other ELECTRA implementations.

* `weight_names`: every variable of our generator/discriminator under the
  original TF1 code's name (the canonical form used here), and the rule that
  turns those names into Hugging Face `transformers` state-dict keys.
* `tf1`: reading google-research/electra checkpoints.
* `huggingface`: reading Hugging Face model directories (safetensors, PyTorch
  `.bin` or TensorFlow `.h5` weights) and writing them (safetensors).
* `torch_pickle`: PyTorch `.bin` state dicts as NumPy arrays, the pickle
  interpreted by a reader that calls nothing it names (no PyTorch needed).
* `tf_h5`: transformers' `tf_model.h5` as a PyTorch-style state dict.
* `keras_hub_preset`: keras-hub `ElectraBackbone` presets, written and read
  with keras-hub's own code (imported only there); `keras_hub_fidelity`: what
  of our model and casing survives there, and the checks an export prints.
* `checkpoints`: any supported checkpoint -> a config plus canonical weights,
  and those weights -> our models or a run directory.
"""
