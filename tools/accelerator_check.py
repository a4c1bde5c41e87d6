"""ELECTRA pre-training steps on an accelerator through JAX, without TensorFlow.

    # Where the shards are (may import TensorFlow): token ids of real text, at most 32 MB.
    python -m tools.accelerator_check --write_npz=ids.npz --from_run=runs/<run>

    # On the accelerator machine (JAX and keras; no TensorFlow needed or imported):
    python -m tools.accelerator_check --npz=ids.npz --model_size=small --steps=100 \
        --batch_size=128 --peak_tflops=989 [--peer]

The check mode runs the joint ELECTRA step (masking as `electra_tf.data.masking`
masks, the generator's masked LM, sampling and replacement with the objective's
own functions, the discriminator, loss = gen_weight * MLM + disc_weight * disc,
gradients and an AdamW update) as one jit-compiled JAX function in bfloat16
compute (Keras' mixed_bfloat16 policy) on the first device JAX sees. Steps after
two warm-up steps are timed. The last line printed is one JSON object: the
device, step time, sequences/s, achieved TFLOP/s and MFU against --peak_tflops
(FLOPs of `electra_tf.flops`), the losses of the first and last step, and
whether TensorFlow was imported (it never should be). With --peer the same
batches go through transformers' ELECTRA (tools/peers/hf_electra_pretraining.py)
on the same device (CUDA when torch sees it, else the CPU), timed the same way.

The optimizer is Keras' AdamW at the preset's peak learning rate (no warm-up or
decay: the figure is the step's speed, not a training run); the peer's
optimizer runs at the same constant rate.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zipfile

MAX_NPZ_BYTES = 32 << 20
# A run directory's record of its shards (`electra_tf.artifacts.run_dir.DATA_FILE`).
RUN_DATA_FILE = "data.json"
SPECIAL_NAMES = ("pad_id", "cls_id", "sep_id", "mask_id")
WARMUP_STEPS = 2
# Probability that a chosen position is shown as [MASK] (`electra_tf.data.masking`).
MASK_TOKEN_RATE = 0.85
NPZ_LAYOUT = (
    "input_ids int32 [N, L], segment_ids int [N, L], and the scalars vocab_size, "
    + ", ".join(SPECIAL_NAMES)
    + " (written by --write_npz)"
)


# --------------------------------------------------------------------------- the ids file
def write_npz(path: str, shard_dir: str, max_bytes: int = MAX_NPZ_BYTES) -> dict:
    """Writes the token ids of a shard directory's first records into `path` (imports TensorFlow).

    Args:
        path: the .npz to write (see `NPZ_LAYOUT`).
        shard_dir: a directory of pre-training shards (with metadata.json).
        max_bytes: the rows kept fill at most this many bytes of arrays.

    Returns:
        {"rows": N, "seq_len": L, "vocab_size": V, **special ids}.
    """
    import numpy as np
    import tensorflow as tf

    from electra_tf import tokenization
    from electra_tf.data.pipeline import load_shard_metadata

    meta = load_shard_metadata(shard_dir)
    seq_len = meta["max_seq_length"]
    with open(os.path.join(shard_dir, "metadata.json"), encoding="utf-8") as f:
        vocab_file = json.load(f).get("vocab_file")
    if not vocab_file:
        raise SystemExit(f"{shard_dir}/metadata.json records no vocab_file.")
    vocab_file = os.path.join(shard_dir, vocab_file)  # an absolute path stays as it is
    vocab = tokenization.load_vocab(vocab_file)
    index = {token: i for i, token in enumerate(vocab)}
    tokens = ("[PAD]", "[CLS]", "[SEP]", "[MASK]")
    missing = [token for token in tokens if token not in index]
    if missing:
        raise SystemExit(f"{vocab_file}: no {' '.join(missing)}; a WordPiece vocabulary has them.")
    specials = {name: index[token] for name, token in zip(SPECIAL_NAMES, tokens)}
    rows = max(1, max_bytes // (seq_len * 5))  # int32 ids + int8 segments per token
    features = {
        name: tf.io.FixedLenFeature([seq_len], tf.int64) for name in ("input_ids", "segment_ids")
    }
    dataset = tf.data.TFRecordDataset(meta["paths"]).take(rows).batch(1024)
    ids, segments = [], []
    for records in dataset:
        parsed = tf.io.parse_example(records, features)
        ids.append(parsed["input_ids"].numpy().astype(np.int32))
        segments.append(parsed["segment_ids"].numpy().astype(np.int8))
    input_ids = np.concatenate(ids)
    np.savez(
        path,
        input_ids=input_ids,
        segment_ids=np.concatenate(segments),
        vocab_size=np.int32(len(vocab)),
        **{name: np.int32(value) for name, value in specials.items()},
    )
    return {
        "rows": int(input_ids.shape[0]),
        "seq_len": seq_len,
        "vocab_size": len(vocab),
        **specials,
    }


def shard_dir_of(path: str) -> str:
    """The shard directory `--from_run` names: the shards themselves, or the ones a run trained on.

    A run directory records its shards in data.json (`RUN_DATA_FILE`, read
    without importing the package's TensorFlow side); a run of an earlier
    version, which does not, is answered with where to look.
    """
    if os.path.isfile(os.path.join(path, "metadata.json")):
        return path
    data_file = os.path.join(path, RUN_DATA_FILE)
    if os.path.isfile(data_file):
        with open(data_file, encoding="utf-8") as f:
            shard_dir = json.load(f).get("shard_dir")
        if shard_dir and os.path.isfile(os.path.join(shard_dir, "metadata.json")):
            return shard_dir
        raise SystemExit(
            f"--from_run={path}: its {RUN_DATA_FILE} names the shards {shard_dir}, which hold "
            "no metadata.json (moved or deleted?); pass the shard directory itself."
        )
    if os.path.isfile(os.path.join(path, "config.json")):
        raise SystemExit(
            f"--from_run={path}: this run (of an earlier version) does not record its shards "
            f"({RUN_DATA_FILE}); pass the shard directory it trained on (the one holding "
            "metadata.json, under the data directory pretrain.py printed, or its --shard_dir)."
        )
    raise SystemExit(
        f"--from_run={path}: neither a run directory ({RUN_DATA_FILE}) nor a directory of "
        "shards (metadata.json)."
    )


def read_npz(path: str) -> dict:
    """The arrays of an ids file, checked against `NPZ_LAYOUT`; refuses anything else in one line.

    Returns:
        {"input_ids": int32 [N, L], "segment_ids": int32 [N, L], "vocab_size": int,
        and the special ids as ints}.
    """
    import numpy as np

    def refuse(why):
        raise SystemExit(f"--npz={path}: {why}; expected {NPZ_LAYOUT}.")

    try:
        with zipfile.ZipFile(path) as archive:
            size = sum(info.file_size for info in archive.infolist())
    except (OSError, zipfile.BadZipFile) as error:
        refuse(f"not a readable .npz ({error})")
    if size > MAX_NPZ_BYTES + (1 << 20):  # the cap plus headers; checked before decompressing
        refuse(f"{size} bytes of arrays, more than {MAX_NPZ_BYTES}")
    with np.load(path, allow_pickle=False) as stored:
        missing = [
            k for k in ("input_ids", "segment_ids", "vocab_size", *SPECIAL_NAMES) if k not in stored
        ]
        if missing:
            refuse(f"no {', '.join(missing)}")
        arrays = {k: stored[k] for k in ("input_ids", "segment_ids", "vocab_size", *SPECIAL_NAMES)}
    ids, segments = arrays["input_ids"], arrays["segment_ids"]
    if ids.ndim != 2 or ids.dtype.kind not in "iu" or ids.shape[0] < 1 or ids.shape[1] < 2:
        refuse(f"input_ids is {ids.dtype} {list(ids.shape)}")
    if segments.shape != ids.shape or segments.dtype.kind not in "iu":
        refuse(f"segment_ids is {segments.dtype} {list(segments.shape)}")
    out = {"input_ids": ids.astype(np.int32), "segment_ids": segments.astype(np.int32)}
    for name in ("vocab_size", *SPECIAL_NAMES):
        if arrays[name].shape != () or arrays[name].dtype.kind not in "iu":
            refuse(f"{name} is not an integer scalar")
        out[name] = int(arrays[name])
    if ids.min() < 0 or ids.max() >= out["vocab_size"]:
        refuse(f"token ids outside [0, vocab_size={out['vocab_size']})")
    return out


# --------------------------------------------------------------------------- masking
def mask_rows(input_ids, input_mask, rng, *, mask_rate, n, pad_id, cls_id, sep_id, mask_id):
    """ELECTRA's masking of `electra_tf.data.masking`, in NumPy, for rows [B, L].

    `count = min(max(1, min(N, round(mask_rate * real tokens))), candidates)`
    distinct candidate positions (real tokens but [PAD], [CLS], [SEP], [MASK])
    are drawn uniformly, used slots first; each becomes [MASK] with
    probability 0.85, else keeps its token. Unused slots: position 0, id 0,
    weight 0.

    Returns:
        {masked_input_ids int32 [B, L], masked_lm_positions, masked_lm_ids int32
        [B, N], masked_lm_weights, sampling_uniforms float32 [B, N]}.
    """
    import numpy as np

    batch, seq_len = input_ids.shape
    real = input_mask == 1
    candidate = real & ~np.isin(input_ids, [pad_id, cls_id, sep_id, mask_id])
    # float64 and half-to-even rounding, as the pipeline counts.
    rounded = np.round(real.sum(1).astype(np.float64) * mask_rate).astype(np.int64)
    count = np.minimum(np.maximum(1, np.minimum(n, rounded)), candidate.sum(1))
    scores = np.where(candidate, rng.random((batch, seq_len)), -1.0)
    top = np.argsort(-scores, axis=1, kind="stable")[:, :n]
    used = np.arange(n)[None, :] < count[:, None]
    positions = np.where(used, top, 0).astype(np.int32)
    ids = np.where(used, np.take_along_axis(input_ids, positions, axis=1), 0).astype(np.int32)
    replace = used & (rng.random((batch, n)) < MASK_TOKEN_RATE)
    masked = input_ids.copy()
    rows = np.broadcast_to(np.arange(batch)[:, None], positions.shape)
    masked[rows[replace], positions[replace]] = mask_id
    return {
        "masked_input_ids": masked.astype(np.int32),
        "masked_lm_positions": positions,
        "masked_lm_ids": ids,
        "masked_lm_weights": used.astype(np.float32),
        "sampling_uniforms": rng.random((batch, n)).astype(np.float32),
    }


def make_batches(
    data: dict, num_batches: int, batch_size: int, n: int, mask_rate: float, seed: int
):
    """`num_batches` masked batches of consecutive rows (wrapping around), as NumPy dicts."""
    import numpy as np

    rng = np.random.default_rng(seed)
    total = data["input_ids"].shape[0]
    specials = {name: data[name] for name in SPECIAL_NAMES}
    batches = []
    for b in range(num_batches):
        index = np.arange(b * batch_size, (b + 1) * batch_size) % total
        ids = data["input_ids"][index]
        mask = (ids != data["pad_id"]).astype(np.int32)
        batch = {"input_ids": ids, "input_mask": mask, "segment_ids": data["segment_ids"][index]}
        batch.update(mask_rows(ids, mask, rng, mask_rate=mask_rate, n=n, **specials))
        batches.append(batch)
    return batches


# --------------------------------------------------------------------------- the JAX step
def use_jax_backend() -> None:
    """Makes Keras run on JAX; refuses another backend forced by KERAS_BACKEND or a prior import."""
    forced = os.environ.get("KERAS_BACKEND")
    if forced and forced != "jax":
        raise SystemExit(
            f"KERAS_BACKEND={forced}: this check runs on JAX; unset it or set KERAS_BACKEND=jax."
        )
    if "keras" in sys.modules and sys.modules["keras"].backend.backend() != "jax":
        raise SystemExit("keras was imported on another backend before this check; run it alone.")
    os.environ["KERAS_BACKEND"] = "jax"


def electra_loss(generator, discriminator, batch, config):
    """The joint ELECTRA loss of one batch and its (MLM loss, discriminator loss), float32 scalars.

    The generator scores the masked slots, tokens are sampled from it (no
    gradient) with the batch's uniforms and replace the originals, and the
    discriminator scores every real token of the corrupted sequence.
    """
    from electra_tf.pretraining import objective

    tokens = {k: batch[k] for k in ("input_mask", "segment_ids")}
    gen_logits = generator(
        {
            **tokens,
            "input_ids": batch["masked_input_ids"],
            "masked_lm_positions": batch["masked_lm_positions"],
        },
        training=True,
    )
    mlm = objective.masked_lm_sums(gen_logits, batch["masked_lm_ids"], batch["masked_lm_weights"])
    sampled = objective.sample_tokens(gen_logits, batch["sampling_uniforms"], config.temperature)
    fake_ids, labels = objective.replace_tokens(
        batch["input_ids"], batch["masked_lm_positions"], sampled, batch["masked_lm_weights"]
    )
    disc_logits = discriminator({**tokens, "input_ids": fake_ids}, training=True)["logits"]
    disc = objective.discriminator_sums(disc_logits, labels, batch["input_mask"])
    mlm_loss = objective.loss_and_accuracy(mlm, "masked_lm")["masked_lm_loss"]
    disc_loss = objective.safe_ratio(disc["loss"], disc["count"])
    return config.gen_weight * mlm_loss + config.disc_weight * disc_loss, (mlm_loss, disc_loss)


def build_jax_step(config):
    """The models, their variables and the jit-compiled training step on the JAX backend.

    The step reads and returns the variables' values (Keras 3's stateless
    pattern: the forward pass runs in a `StatelessScope` over every variable
    of both models, shared embeddings once; `optimizer.stateless_apply`
    updates them).

    Returns:
        (step, state): `step(state, batch) -> (state, (loss, mlm_loss, disc_loss))`
        and the initial state (trainable, non-trainable, optimizer values).
    """
    import jax
    import keras

    from electra_tf.modeling.electra import build_generator_and_discriminator

    generator, discriminator = build_generator_and_discriminator(
        config.model, dtype="mixed_bfloat16", kernels="reference"
    )
    trainable, others, seen = [], [], set()
    for model in (generator, discriminator):
        for variable in model.variables:  # dropout seeds included
            if id(variable) not in seen:
                seen.add(id(variable))
                (trainable if variable.trainable else others).append(variable)
    optimizer = keras.optimizers.AdamW(
        learning_rate=config.learning_rate,
        weight_decay=config.weight_decay_rate,
        beta_1=config.adam_beta_1,
        beta_2=config.adam_beta_2,
        epsilon=config.adam_epsilon,
        global_clipnorm=config.clip_norm or None,
    )
    optimizer.build(trainable)

    def loss_fn(trainable_values, other_values, batch):
        mapping = list(zip(trainable, trainable_values)) + list(zip(others, other_values))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            loss, parts = electra_loss(generator, discriminator, batch, config)
        # Dropout's seed generators moved on: their new values are the new state.
        new_others = [scope.get_current_value(v) for v in others]
        return loss, (new_others, parts)

    def step(state, batch):
        trainable_values, other_values, optimizer_values = state
        (loss, (other_values, parts)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            trainable_values, other_values, batch
        )
        trainable_values, optimizer_values = optimizer.stateless_apply(
            optimizer_values, grads, trainable_values
        )
        return (trainable_values, other_values, optimizer_values), (loss, *parts)

    state = (
        [v.value for v in trainable],
        [v.value for v in others],
        [v.value for v in optimizer.variables],
    )
    return jax.jit(step, donate_argnums=0), state


def time_steps(run_step, batches, warmup: int = WARMUP_STEPS) -> dict:
    """Runs `run_step(batch) -> (loss, ...)` on every batch; times those after `warmup`.

    `run_step` returns once its step has finished (the caller synchronises).

    Returns:
        {"seconds_per_step", "first_loss", "last_loss"} (losses as floats).
    """
    losses = []
    for batch in batches[:warmup]:
        losses.append(run_step(batch))
    started = time.perf_counter()
    for batch in batches[warmup:]:
        losses.append(run_step(batch))
    seconds = (time.perf_counter() - started) / max(1, len(batches) - warmup)
    return {
        "seconds_per_step": seconds,
        "first_loss": [float(x) for x in losses[0]],
        "last_loss": [float(x) for x in losses[-1]],
    }


def run_jax(config, batches) -> dict:
    """Times the JAX step over `batches` on the first device JAX sees."""
    import jax

    step, state = build_jax_step(config)
    device = jax.devices()[0]
    on_device = [jax.device_put(b, device) for b in batches]
    holder = {"state": jax.device_put(state, device)}

    def run_step(batch):
        holder["state"], losses = step(holder["state"], batch)
        return jax.block_until_ready(losses)

    timed = time_steps(run_step, on_device)
    return {
        "device": f"{device.platform}:{device.device_kind}",
        "devices_seen": len(jax.devices()),
        "devices_used": 1,
        **timed,
    }


# --------------------------------------------------------------------------- the peer
def peer_settings(config) -> dict:
    """The description the peer script builds from, at a constant learning rate as the JAX side's."""
    from tools.peer_settings import peer_settings as described

    settings = described(config)
    settings["recipe"].update(num_train_steps=10**9, num_warmup_steps=0, lr_decay_power=0.0)
    return settings


def run_peer(config, batches) -> dict:
    """Times transformers' ELECTRA step on the same batches (bfloat16 autocast on CUDA).

    Returns:
        The `time_steps` figures and the device, or {"error": why} when torch
        or transformers cannot be imported.
    """
    try:
        import torch

        from tools.peers import hf_electra_pretraining as peer
    except ImportError as error:
        return {"error": f"the peer needs torch and transformers: {error}"}
    settings = peer_settings(config)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    generator, discriminator = (m.to(device).train() for m in peer.build_models(settings))
    optimizer = peer.AdamWeightDecay(
        peer.trainable_parameters(generator, discriminator), settings["recipe"]
    )
    tensors = [
        {
            k: (
                torch.from_numpy(v).float() if v.dtype.kind == "f" else torch.from_numpy(v).long()
            ).to(device)
            for k, v in batch.items()
        }
        for batch in batches
    ]

    def run_step(batch):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            out = peer.forward(generator, discriminator, batch, settings["recipe"])
        for parameter in optimizer.parameters:
            parameter.grad = None
        out["loss"].backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return (out["loss"].item(),)

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {
        "device": f"{device.type}:{name}",
        "torch": torch.__version__,
        **time_steps(run_step, tensors),
    }


# --------------------------------------------------------------------------- the report
def report(config, ours: dict, peak_tflops, peer=None) -> dict:
    """The JSON object of the check: speed, utilisation, losses, versions."""
    import jax
    import keras

    from electra_tf.flops import executed_train_flops_per_step, train_flops_per_step

    seconds = ours["seconds_per_step"]
    flops, executed = train_flops_per_step(config), executed_train_flops_per_step(config)
    out = {
        "device": ours["device"],
        "devices_seen": ours["devices_seen"],
        "devices_used": ours["devices_used"],
        "model_size": config.model_size,
        "batch_size": config.train_batch_size,
        "seq_len": config.max_seq_length,
        "compute_dtype": "bfloat16",
        "seconds_per_step": seconds,
        "sequences_per_second": config.train_batch_size / seconds,
        "flops_per_step": flops,
        "achieved_tflops": flops / seconds / 1e12,
        "executed_flops_per_step": executed,
        "executed_tflops": executed / seconds / 1e12,
        "first_loss": ours["first_loss"][0],
        "last_loss": ours["last_loss"][0],
        "first_mlm_and_disc_loss": ours["first_loss"][1:],
        "last_mlm_and_disc_loss": ours["last_loss"][1:],
        "jax": jax.__version__,
        "keras": keras.__version__,
    }
    if peak_tflops:
        out["peak_tflops"] = peak_tflops
        out["mfu"] = out["achieved_tflops"] / peak_tflops
        out["executed_mfu"] = out["executed_tflops"] / peak_tflops
    if peer is not None:
        out["peer"] = peer
        if "seconds_per_step" in peer:
            out["speedup_vs_peer"] = peer["seconds_per_step"] / seconds
    return out


def check(args) -> dict:
    """The check mode: reads the ids, builds the config, times the step (and the peer)."""
    use_jax_backend()
    from electra_tf.config import preset

    data = read_npz(args.npz)
    seq_len = data["input_ids"].shape[1]
    config = preset(
        args.model_size,
        vocab_size=data["vocab_size"],
        max_seq_length=seq_len,
        train_batch_size=args.batch_size,
        kernels="reference",
    )
    config.validate()
    batches = make_batches(
        data,
        args.steps + WARMUP_STEPS,
        args.batch_size,
        config.resolved_max_predictions_per_seq,
        config.mask_rate,
        args.seed,
    )
    ours = run_jax(config, batches)
    peer = run_peer(config, batches) if args.peer else None
    out = report(config, ours, args.peak_tflops, peer)
    out["tensorflow_imported"] = "tensorflow" in sys.modules
    return out


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--npz", help="the token ids to train on (check mode)")
    parser.add_argument("--write_npz", help="write token ids of --from_run's shards here")
    parser.add_argument(
        "--from_run",
        help="a pre-training run directory (its data.json names its shards), or a directory "
        "of shards (metadata.json)",
    )
    parser.add_argument("--model_size", default="small", help="the preset (tiny, small, base, ...)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps, after 2 warm-up steps")
    parser.add_argument("--batch_size", type=int, default=128, help="sequences per step")
    parser.add_argument("--peak_tflops", type=float, default=0.0, help="the device's bf16 peak")
    parser.add_argument("--peer", action="store_true", help="also time transformers on PyTorch")
    parser.add_argument("--seed", type=int, default=0, help="masking and sampling noise")
    args = parser.parse_args(argv)
    if bool(args.npz) == bool(args.write_npz):
        parser.error("give --npz (check) or --write_npz with --from_run (write the ids).")
    if args.write_npz and not args.from_run:
        parser.error("--write_npz needs --from_run.")
    if args.steps < 1 or args.batch_size < 1 or args.peak_tflops < 0:
        parser.error("--steps and --batch_size must be >= 1, --peak_tflops >= 0.")
    return args


def main(argv=None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.write_npz:
        out = write_npz(args.write_npz, shard_dir_of(args.from_run))
    else:
        out = check(args)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
