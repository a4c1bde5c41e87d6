"""Runs pre-training models on the Keras backend KERAS_BACKEND names; writes what they computed.

    KERAS_BACKEND=jax python tests/backend_child.py MODE OUT.npz CASE_DIR...

Every CASE_DIR holds config.json (a `PretrainingConfig`), weights.npz and batch.npz;
what the case's models compute is written to CASE_DIR/OUT.npz. One process runs every
case, so the backend and the package are imported once.

MODE "pair": the generator and discriminator of `build_generator_and_discriminator`
(reference kernels, the config's weight sharing; Electric's cloze generator for its
objective), run without dropout on the batch; OUT.npz holds `generator_logits`
([B, N, V], or [B, L, V] for the cloze generator), `discriminator_logits` [B, L],
`sequence_output` [B, L, H] and `imported_tensorflow` (whether the process had
imported TensorFlow by the end).

MODE "objective": the config's pretrainer (`make_pretrainer`, reference kernels) on the
batch, whose `sampling_uniforms` fix the generator's samples; OUT.npz holds every named sum
as `sums/<group>/<name>`, the total loss (and the generator's and discriminator's
where the objective has a discriminator loss), the sampled and
corrupted ids (where the objective samples), and `grad/<i>`: the gradient of the total loss for trainable variable i
(in `trainable_variables` order).

weights.npz holds `weight_<i>` for the model's `weights` in order and `paths`, checked
against the model's, so both backends run exactly the same numbers.
"""

import json
import os
import sys


def generator_kind(config) -> str:
    """Electric's cloze generator for its objective, else ELECTRA's masked LM."""
    return "two_tower_cloze" if config.objective == "electric" else "masked_lm"


def build(mode, config, batch):
    """The models of `mode`, built (variables created) on this process's backend.

    Returns:
        "pair": (generator, discriminator, `Weights` of both); "objective":
        (the pretrainer, None, `Weights` of it).
    """
    if mode == "pair":
        from electra_tf.modeling.electra import build_generator_and_discriminator

        generator, discriminator = build_generator_and_discriminator(
            config.model,
            weight_sharing=config.weight_sharing,
            generator_kind=generator_kind(config),
            kernels="reference",
        )
        # Functional models: their variables exist once they are constructed.
        return generator, discriminator, Weights(generator, discriminator)
    from electra_tf.modeling.layers import ReplicaDropout
    from electra_tf.pretraining.objectives import make_pretrainer

    model = make_pretrainer(config)
    # Heads outside the functional models are built by a forward pass (dropout
    # layers own their seed from the start).
    layers = model._flatten_layers(include_self=False)
    if not all(layer.built for layer in layers if not isinstance(layer, ReplicaDropout)):
        model.build_from_batch(batch)
    return model, None, Weights(model)


# A pretrainer's step counters: Keras variables on JAX, TensorFlow's own (not among
# `weights`) on TensorFlow; the same on both backends (zero), so not compared.
COUNTERS = ("seen_batches", "discriminator_initialised")


class Weights:
    """The variables of some models, shared ones once, in a fixed order, by path."""

    def __init__(self, *models):
        seen, self.variables = set(), []
        for model in models:
            for w in model.weights:
                if id(w) not in seen and w.path not in COUNTERS:
                    seen.add(id(w))
                    self.variables.append(w)

    @property
    def paths(self):
        return [w.path for w in self.variables]

    def save(self, path, values):
        import numpy as np

        np.savez(
            path, paths=np.array(self.paths), **{f"weight_{i}": v for i, v in enumerate(values)}
        )

    def load(self, path):
        import numpy as np

        stored = np.load(path)
        paths = [str(p) for p in stored["paths"]]
        if paths != self.paths:
            raise SystemExit(f"{path}: the weights of another model: {paths} != {self.paths}")
        for i, variable in enumerate(self.variables):
            variable.assign(stored[f"weight_{i}"])


def run_pair(generator, discriminator, weights, batch):
    import keras

    if keras.backend.backend() != "jax":
        return pair_outputs(generator, discriminator, batch)
    import jax

    # One compiled function: JAX's eager ops would each be compiled on their own.
    def pure(values):
        with keras.StatelessScope(state_mapping=list(zip(weights.variables, values))):
            return pair_outputs(generator, discriminator, batch)

    return jax.jit(pure)([v.value for v in weights.variables])


def pair_outputs(generator, discriminator, batch):
    """{name: output} of the generator and discriminator (see the module docstring)."""
    tokens = {name: batch[name] for name in ("input_ids", "input_mask", "segment_ids")}
    if "masked_lm_positions" in generator.input:
        generator_inputs = {
            **tokens,
            "input_ids": batch["masked_input_ids"],
            "masked_lm_positions": batch["masked_lm_positions"],
        }
    else:  # the cloze generator reads the unmasked sequence
        generator_inputs = tokens
    outputs = discriminator(tokens, training=False)
    return {
        "generator_logits": generator(generator_inputs, training=False),
        "discriminator_logits": outputs["logits"],
        "sequence_output": outputs["sequence_output"],
    }


def run_objective(model, _, weights, batch):
    import keras

    from electra_tf.pretraining.pretrainer import statistics

    tensors = {name: keras.ops.convert_to_tensor(value) for name, value in batch.items()}

    def losses(out):
        sums, counts = statistics(out), out["counts"]
        named = {"total_loss": model._loss(sums, counts)}
        if "disc" in sums:  # ELECTRA and the objectives that keep its discriminator
            named["generator_loss"] = model.generator_loss(sums, counts)
            named["discriminator_loss"] = model.discriminator_loss(sums, counts)
        return named

    backend = keras.backend.backend()
    variables = model.trainable_variables
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            out = model.compute_sums(tensors, training=True)
            named = losses(out)
        # Embedding gradients come as IndexedSlices: made dense.
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(named["total_loss"], variables)]
    elif backend == "jax":
        import jax

        others = [(v, v.value) for v in model.non_trainable_variables]

        def total(trainable):
            # The forward pass reads the trainable variables from `trainable`.
            with keras.StatelessScope(state_mapping=list(zip(variables, trainable)) + others):
                out = model.compute_sums(tensors, training=True)
                named = losses(out)
            return named["total_loss"], (out, named)

        trainable = [v.value for v in variables]
        (_, (out, named)), grads = jax.jit(jax.value_and_grad(total, has_aux=True))(trainable)
    else:
        raise SystemExit(f"KERAS_BACKEND={backend}: this script runs tensorflow or jax.")
    result = {f"grad/{i}": g for i, g in enumerate(grads)}
    result["grad_paths"] = [v.path for v in variables]
    for group, values in statistics(out).items():
        for name, value in values.items():
            result[f"sums/{group}/{name}"] = value
    result.update(named)
    for name in ("sampled_ids", "fake_ids", "labels"):
        if name in out:
            result[name] = out[name]
    return result


def main(argv):
    import numpy as np

    from electra_tf.config import PretrainingConfig

    mode, out_name, *cases = argv[1:]
    run = {"pair": run_pair, "objective": run_objective}[mode]
    for case in cases:
        with open(os.path.join(case, "config.json")) as f:
            config = PretrainingConfig.from_dict(json.load(f))
        batch = dict(np.load(os.path.join(case, "batch.npz")))
        first, second, weights = build(mode, config, batch)
        weights.load(os.path.join(case, "weights.npz"))
        result = run(first, second, weights, batch)
        if mode == "pair":
            result["imported_tensorflow"] = "tensorflow" in sys.modules
        np.savez(
            os.path.join(case, out_name),
            **{name: np.asarray(value) for name, value in result.items()},
        )


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main(sys.argv)
