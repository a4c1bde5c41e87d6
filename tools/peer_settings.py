"""What tools/peers/hf_electra_pretraining.py builds its models and recipe from.

`tools.parity` (learning curves) and `tools.accelerator_check` (step time on
an accelerator, without TensorFlow) both hand it a `PretrainingConfig` so
described; this module imports neither TensorFlow nor Keras.
"""

from __future__ import annotations


class ParityError(ValueError):
    """The comparison cannot run as asked; the message says why."""


def peer_settings(config, eval_every_steps: int = 0, initialisation: str = "transformers") -> dict:
    """What the peer script needs to build the same models and follow the same recipe.

    Args:
        config: the `PretrainingConfig` electra-tf trains with.
        eval_every_steps: held-out evaluation every this many steps (0: none).
        initialisation: "transformers" (the models' own: every dense kernel
            from N(0, 0.02)) or "original" (Glorot uniform for the
            discriminator's output layer and `embeddings_project`, as the
            original code and electra-tf).

    Raises:
        ParityError: the config uses a variant the peer does not implement.
    """
    plain = {
        "objective": "electra",
        "training": "joint",
        "weight_sharing": "embeddings",
        "uniform_generator": False,
        "disallow_correct": False,
        "mixed_precision": "none",
    }
    different = [f"{k}={getattr(config, k)!r}" for k, v in plain.items() if getattr(config, k) != v]
    if different:
        raise ParityError("the peer implements plain ELECTRA only, not " + ", ".join(different))
    m, g = config.model, config.model.generator_config()
    return {
        "model": {
            "vocab_size": m.vocab_size,
            "embedding_size": m.embedding_size,
            "hidden_size": m.hidden_size,
            "num_layers": m.num_layers,
            "num_heads": m.resolved_num_heads,
            "intermediate_size": m.resolved_intermediate_size,
            "max_position_embeddings": m.max_position_embeddings,
            "type_vocab_size": m.type_vocab_size,
            "dropout_rate": m.dropout_rate,
            "attention_dropout_rate": m.attention_dropout_rate,
            "initializer_range": m.initializer_range,
            "layer_norm_epsilon": m.layer_norm_epsilon,
        },
        "generator": {
            "hidden_size": g.hidden_size,
            "num_layers": g.num_layers,
            "num_heads": g.resolved_num_heads,
            "intermediate_size": g.resolved_intermediate_size,
        },
        "recipe": {
            name: getattr(config, name)
            for name in (
                "learning_rate",
                "num_train_steps",
                "num_warmup_steps",
                "lr_decay_power",
                "weight_decay_rate",
                "adam_beta_1",
                "adam_beta_2",
                "adam_epsilon",
                "clip_norm",
                "gen_weight",
                "disc_weight",
                "temperature",
            )
        },
        "eval_every_steps": eval_every_steps,
        "initialisation": initialisation,
    }
