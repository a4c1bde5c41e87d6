"""Fine-tuning optimisation: AdamW (no bias correction) with layer-wise learning-rate decay.

Layer-wise decay (ELECTRA paper, Appendix A) lowers the learning rate of the
layers closest to the input: a variable at depth d gets

    lr * decay ** (top_depth - d)

Depths: 0 for the embeddings (and the embedding projection), i + 1 for
transformer layer i, and the task head on top. Where the head sits decides the
top layer's rate:

* default: head at depth num_layers + 1, so the top transformer layer trains
  at lr * decay (what the paper describes);
* `quirk=True`: head at num_layers + 2, as the original code does (it
  reserves a depth for a pooler ELECTRA's classifier never uses), so the top
  layer trains at lr * decay ** 2 and every encoder layer one factor lower.
"""

from __future__ import annotations

import re
from typing import Optional

import keras

from electra_tf.keras_compat import variable_index
from electra_tf.optimization import AdamWeightDecay, WarmupLinearDecay

_LAYER_PATTERN = re.compile(r"transformer_layer_(\d+)")


def variable_depth(
    path: str, num_layers: int, head_name: str = "task_head", quirk: bool = False
) -> Optional[int]:
    """Depth of a variable from its path, or None when it belongs to no known part.

    Args:
        path: Keras variable path, e.g. `transformer_layer_3/attention/qkv/kernel`.
        num_layers: transformer layers in the encoder.
        head_name: name of the task head layer.
        quirk: place the head one level higher (see the module docstring).
    """
    parts = path.split("/")
    if parts[0] in ("embeddings", "embeddings_project"):
        return 0
    match = _LAYER_PATTERN.fullmatch(parts[0])
    if match:
        layer = int(match.group(1))
        return layer + 1 if layer < num_layers else None
    if parts[0] == head_name:
        return num_layers + (2 if quirk else 1)
    return None


def layerwise_multipliers(
    variables, num_layers: int, decay: float, head_name: str = "task_head", quirk: bool = False
) -> dict[str, float]:
    """Learning-rate multiplier of every variable, keyed by its path.

    Args:
        variables: the model's trainable variables.
        num_layers: transformer layers in the encoder.
        decay: layer-wise decay factor (1.0 disables the decay).
        head_name: name of the task head layer.
        quirk: reproduce the original code's decay ** 2 on the top layer.

    Returns:
        {path: multiplier}.

    Raises:
        ValueError: a variable belongs to no known part, or two variables
            share a path (either would leave its rate ambiguous).
    """
    top = num_layers + (2 if quirk else 1)
    multipliers: dict[str, float] = {}
    unknown = []
    for variable in variables:
        depth = variable_depth(variable.path, num_layers, head_name, quirk)
        if depth is None:
            unknown.append(variable.path)
            continue
        if variable.path in multipliers:
            raise ValueError(
                f"Two trainable variables share the path {variable.path!r}; "
                "layer-wise learning rates need unique paths."
            )
        multipliers[variable.path] = float(decay ** (top - depth))
    if unknown:
        raise ValueError(
            "No layer-wise learning rate for these trainable variables (expected "
            "embeddings/, embeddings_project/, transformer_layer_<i>/ or "
            f"{head_name}/): {', '.join(unknown)}"
        )
    return multipliers


@keras.saving.register_keras_serializable(package="electra_tf")
class LayerwiseAdamWeightDecay(AdamWeightDecay):
    """`AdamWeightDecay` with a learning-rate multiplier per variable.

    The multiplier scales the whole step of the variable, the Adam part and
    the decoupled weight decay alike, as in the original code:

        w -= lr * multiplier * (m / (sqrt(v) + epsilon) + weight_decay * w)

    Args:
        lr_multipliers: {variable path: multiplier}; every variable the
            optimizer updates must have one.
        **kwargs: see `AdamWeightDecay`.
    """

    def __init__(self, lr_multipliers: dict[str, float], **kwargs):
        super().__init__(**kwargs)
        self.lr_multipliers = dict(lr_multipliers)
        self._multiplier_by_index: list[float] = []

    def build(self, var_list):
        if self.built:
            return
        missing = [v.path for v in var_list if v.path not in self.lr_multipliers]
        if missing:
            raise ValueError(f"No learning-rate multiplier for: {', '.join(missing)}")
        super().build(var_list)
        self._multiplier_by_index = [0.0] * len(var_list)
        for variable in var_list:
            self._multiplier_by_index[variable_index(self, variable)] = self.lr_multipliers[
                variable.path
            ]

    def learning_rate_multiplier(self, index: int) -> float:
        return self._multiplier_by_index[index]

    def get_config(self):
        config = super().get_config()
        config["lr_multipliers"] = dict(self.lr_multipliers)
        return config


def learning_rate_schedule(
    learning_rate: float, num_train_steps: int, warmup_proportion: float = 0.1
) -> WarmupLinearDecay:
    """Linear warmup over `warmup_proportion` of the steps, then linear decay to 0."""
    return WarmupLinearDecay(
        learning_rate, num_train_steps, int(round(warmup_proportion * num_train_steps)), 1.0
    )


def create_optimizer(
    model,
    num_layers: int,
    learning_rate: float,
    num_train_steps: int,
    warmup_proportion: float = 0.1,
    layerwise_decay: float = 0.8,
    weight_decay_rate: float = 0.0,
    quirk: bool = False,
    clip_norm: float = 1.0,
    mixed_precision: str = "none",
) -> keras.optimizers.Optimizer:
    """The fine-tuning optimiser: linear warmup, linear decay to 0, layer-wise rates.

    Args:
        model: the model whose trainable variables will be updated.
        num_layers: transformer layers of its encoder.
        learning_rate: peak learning rate (of the head).
        num_train_steps: total optimizer steps.
        warmup_proportion: fraction of steps spent warming up.
        layerwise_decay: decay factor per layer.
        weight_decay_rate: decoupled weight decay (paper: 0; original code: 0.01).
        quirk: reproduce the original code's extra decay factor.
        clip_norm: global gradient-norm clip (0 disables).
        mixed_precision: "float16" wraps the optimiser in a `LossScaleOptimizer`
            (dynamic loss scaling); "none" and "bfloat16" need none.

    Returns:
        A `LayerwiseAdamWeightDecay`, or a `LossScaleOptimizer` around one.
    """
    schedule = learning_rate_schedule(learning_rate, num_train_steps, warmup_proportion)
    multipliers = layerwise_multipliers(
        model.trainable_variables, num_layers, layerwise_decay, quirk=quirk
    )
    optimizer = LayerwiseAdamWeightDecay(
        multipliers,
        learning_rate=schedule,
        weight_decay=weight_decay_rate,
        global_clipnorm=clip_norm,
    )
    if mixed_precision == "float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer
