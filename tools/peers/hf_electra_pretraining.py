"""ELECTRA pre-training with Hugging Face `transformers`, on batches given from outside.

    python tools/peers/hf_electra_pretraining.py --batches batches.npz --settings settings.json \
        --output transformers.jsonl [--seed 0] [--threads 1]

An independent implementation of electra-tf's recipe, used by
`python -m tools.parity` to compare learning curves. It needs only
`torch`, `transformers` and `numpy` (run it with an interpreter that has
them; they are not requirements of electra-tf).

* Models: `ElectraForMaskedLM` (generator) and `ElectraForPreTraining`
  (discriminator) sharing one `ElectraEmbeddings` (word, position and token
  type tables and the embedding LayerNorm), as the original code shares them.
  The generator's output layer is the shared word table (its own bias).
* Step: the generator scores the masked slots of `masked_input_ids`; tokens
  are drawn from softmax(logits / temperature) by inverse CDF with the
  batch's `sampling_uniforms`, without gradient; they replace the originals
  (a sample equal to the original is labelled real); the discriminator scores
  every non-pad token. Loss = gen_weight * MLM + disc_weight * disc.
* Optimiser: one Adam over both models without bias correction, decoupled
  weight decay (not on LayerNorm or biases), global-norm clipping, learning
  rate peak * min(1, step / warmup) * (1 - step / total) ** power, written
  here because torch's AdamW corrects the bias.

The masks, positions and sampling uniforms come from the batches file, so
this script makes no random choice other than the initial weights and the
dropout masks (`--seed`).

Inputs:
    batches.npz: `input_ids`, `input_mask`, `segment_ids`, `masked_input_ids`
        int [S, B, L]; `masked_lm_positions`, `masked_lm_ids` int [S, B, N];
        `masked_lm_weights`, `sampling_uniforms` float [S, B, N]: one training
        batch per step. The same names prefixed with `eval_` ([E, B, ...]):
        the held-out batches.
    settings.json: {"model": ..., "generator": ..., "recipe": ...,
        "eval_every_steps": K, "initialisation": "transformers" or
        "original"} (see `tools.parity.peer_settings`): the models'
        own initialisation, or the original code's (`original_initialisation`).

Output: JSON lines, one per training step ({"split": "train", "step": s,
...}, the metrics of the step's forward pass, dropout on), one per held-out
evaluation ({"split": "eval", ...} at step 0, every K steps and at the end,
dropout off) and a last {"split": "summary", ...} with the wall times.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
import torch.nn.functional as F
from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

BATCH_KEYS = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_input_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "sampling_uniforms",
)
# The original code divides its sums by (count + 1e-6), so does electra-tf.
EPSILON = 1e-6


def electra_config(model: dict) -> ElectraConfig:
    """An `ElectraConfig` from the `settings.json` description of one model."""
    return ElectraConfig(
        vocab_size=model["vocab_size"],
        embedding_size=model["embedding_size"],
        hidden_size=model["hidden_size"],
        num_hidden_layers=model["num_layers"],
        num_attention_heads=model["num_heads"],
        intermediate_size=model["intermediate_size"],
        max_position_embeddings=model["max_position_embeddings"],
        type_vocab_size=model["type_vocab_size"],
        hidden_act="gelu",
        hidden_dropout_prob=model["dropout_rate"],
        attention_probs_dropout_prob=model["attention_dropout_rate"],
        initializer_range=model["initializer_range"],
        layer_norm_eps=model["layer_norm_epsilon"],
    )


def build_models(settings: dict):
    """Generator and discriminator with the discriminator's embeddings shared.

    Returns:
        (generator `ElectraForMaskedLM`, discriminator `ElectraForPreTraining`).
    """
    discriminator = ElectraForPreTraining(electra_config(settings["model"]))
    generator = ElectraForMaskedLM(electra_config({**settings["model"], **settings["generator"]}))
    generator.electra.embeddings = discriminator.electra.embeddings
    generator.generator_lm_head.weight = discriminator.electra.embeddings.word_embeddings.weight
    return generator, discriminator


def original_initialisation(generator, discriminator) -> None:
    """Glorot-uniform weights where the original code leaves TensorFlow's default.

    `transformers` draws every dense kernel from N(0, initializer_range); the
    original code does so too except for the discriminator's output layer
    (hidden -> 1) and the `embeddings_project` layers, which it builds
    without an initializer, so they get TensorFlow's Glorot uniform (about
    6x larger for the tiny model's output layer). electra-tf follows the
    original.
    """
    layers = [discriminator.discriminator_predictions.dense_prediction]
    layers += [
        model.electra.embeddings_project
        for model in (generator, discriminator)
        if hasattr(model.electra, "embeddings_project")
    ]
    with torch.no_grad():
        for layer in layers:
            torch.nn.init.xavier_uniform_(layer.weight)


def trainable_parameters(generator, discriminator) -> list:
    """(name, parameter) of both models, each shared parameter once."""
    seen, out = set(), []
    for prefix, model in (("discriminator", discriminator), ("generator", generator)):
        for name, parameter in model.named_parameters():
            if id(parameter) not in seen:
                seen.add(id(parameter))
                out.append((f"{prefix}.{name}", parameter))
    return out


def learning_rate(step: int, recipe: dict) -> float:
    """peak * (1 - step / total) ** power * min(1, step / warmup), as the original code."""
    progress = min(step, recipe["num_train_steps"]) / recipe["num_train_steps"]
    rate = recipe["learning_rate"] * (1.0 - progress) ** recipe["lr_decay_power"]
    if recipe["num_warmup_steps"] > 0:
        rate *= min(1.0, step / recipe["num_warmup_steps"])
    return rate


class AdamWeightDecay:
    """The original ELECTRA optimiser: Adam without bias correction, decoupled weight decay.

    update = m / (sqrt(v) + epsilon) + weight_decay * w;  w -= lr * update,
    after the gradients of all parameters are clipped to a global norm.

    Args:
        named_parameters: (name, parameter) pairs; names containing
            "LayerNorm" or "bias" get no weight decay.
        recipe: `learning_rate` schedule fields plus `weight_decay_rate`,
            `adam_beta_1`, `adam_beta_2`, `adam_epsilon`, `clip_norm` (0: off).
    """

    def __init__(self, named_parameters, recipe: dict):
        self.parameters = [p for _, p in named_parameters]
        self.decays = [not ("LayerNorm" in n or "bias" in n) for n, _ in named_parameters]
        self.m = [torch.zeros_like(p) for p in self.parameters]
        self.v = [torch.zeros_like(p) for p in self.parameters]
        self.recipe = recipe
        self.step_count = 0

    @torch.no_grad()
    def step(self) -> float:
        """Applies one update from the parameters' `.grad`; returns the learning rate used."""
        r = self.recipe
        # The schedule is read at the step count before the update, so the
        # first update has rate 0 (as in the original code and Keras).
        lr = learning_rate(self.step_count, r)
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.parameters]
        if r["clip_norm"]:
            norm = torch.sqrt(sum(torch.sum(g * g) for g in grads))
            scale = r["clip_norm"] / torch.maximum(norm, torch.tensor(r["clip_norm"]))
            grads = [g * scale for g in grads]
        for p, g, m, v, decay in zip(self.parameters, grads, self.m, self.v, self.decays):
            m.mul_(r["adam_beta_1"]).add_(g, alpha=1.0 - r["adam_beta_1"])
            v.mul_(r["adam_beta_2"]).addcmul_(g, g, value=1.0 - r["adam_beta_2"])
            update = m / (v.sqrt() + r["adam_epsilon"])
            if decay and r["weight_decay_rate"]:
                update = update + r["weight_decay_rate"] * p
            p.sub_(lr * update)
        self.step_count += 1
        return lr


def sample_tokens(logits, uniforms, temperature: float = 1.0):
    """One token per slot from softmax(logits / temperature), by inverse CDF.

    Args:
        logits: float [B, N, V].
        uniforms: float [B, N] in [0, 1).

    Returns:
        int64 [B, N]: the first id whose cumulative probability exceeds u.
    """
    with torch.no_grad():
        probs = torch.softmax(logits.float() / temperature, dim=-1)
        cdf = torch.cumsum(probs, dim=-1)
        # Scaled by the total, so rounding in the sum never leaves u past the end.
        targets = uniforms.float()[..., None] * cdf[..., -1:]
        ids = torch.searchsorted(cdf, targets.contiguous(), right=True)[..., 0]
        return torch.clamp(ids, max=logits.shape[-1] - 1)


def replace_tokens(input_ids, positions, sampled, weights):
    """Writes samples into the used slots' positions; labels = 1 where the token changed.

    Args:
        input_ids: int64 [B, L]; positions, sampled: int64 [B, N]; weights: float [B, N].

    Returns:
        (fake_ids int64 [B, L], labels float [B, L]).
    """
    original = torch.gather(input_ids, 1, positions)
    updates = torch.where(weights > 0, sampled, original)
    fake_ids = input_ids.scatter(1, positions, updates)
    return fake_ids, (fake_ids != input_ids).float()


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """P(score of a random positive > score of a random negative), ties counted 1/2."""
    scores = np.asarray(scores, np.float64).reshape(-1)
    labels = np.asarray(labels).reshape(-1).astype(bool)
    positives = int(labels.sum())
    negatives = labels.size - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    ends = np.r_[starts[1:], scores.size]
    ranks = np.empty(scores.size, np.float64)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)  # tied ranks averaged
    return float(
        (ranks[labels].sum() - positives * (positives + 1) / 2.0) / (positives * negatives)
    )


def forward(generator, discriminator, batch: dict, recipe: dict) -> dict:
    """One ELECTRA forward pass over a batch of torch tensors.

    Returns:
        dict with `loss` (the total, with gradient) and the sums the metrics
        are made of (detached): `nll`, `slots`, `correct`, `sampled_correct`,
        `disc_loss`, `tokens`, `disc_correct`, `true_positive`,
        `predicted_positive`, `actual_positive`, plus `disc_logits` and
        `labels` [B, L] and `mask` [B, L].
    """
    weights = batch["masked_lm_weights"].float()
    positions = batch["masked_lm_positions"]
    hidden = generator.electra(
        batch["masked_input_ids"],
        attention_mask=batch["input_mask"],
        token_type_ids=batch["segment_ids"],
    ).last_hidden_state
    # Only the masked slots go through the output layer, as in the original code.
    at_slots = torch.gather(hidden, 1, positions[..., None].expand(-1, -1, hidden.shape[-1]))
    logits = generator.generator_lm_head(generator.generator_predictions(at_slots))  # [B, N, V]
    nll = F.cross_entropy(
        logits.float().transpose(1, 2), batch["masked_lm_ids"], reduction="none"
    )  # [B, N]
    slots = weights.sum()
    mlm_loss = (weights * nll).sum() / (slots + EPSILON)

    sampled = sample_tokens(logits.detach(), batch["sampling_uniforms"], recipe["temperature"])
    fake_ids, labels = replace_tokens(batch["input_ids"], positions, sampled, weights)
    disc_logits = discriminator(
        fake_ids, attention_mask=batch["input_mask"], token_type_ids=batch["segment_ids"]
    ).logits.float()  # [B, L]
    mask = batch["input_mask"].float()
    token_loss = F.binary_cross_entropy_with_logits(disc_logits, labels, reduction="none")
    tokens = mask.sum()
    disc_loss = (mask * token_loss).sum() / (tokens + EPSILON)
    loss = recipe["gen_weight"] * mlm_loss + recipe["disc_weight"] * disc_loss

    predicted = (disc_logits > 0).float()
    d = lambda t: t.detach()  # noqa: E731
    return {
        "loss": loss,
        "nll": d((weights * nll).sum()),
        "slots": slots,
        "correct": (weights * (logits.argmax(-1) == batch["masked_lm_ids"]).float()).sum(),
        "sampled_correct": (weights * (sampled == batch["masked_lm_ids"]).float()).sum(),
        "disc_loss": d((mask * token_loss).sum()),
        "tokens": tokens,
        "disc_correct": (mask * (predicted == labels).float()).sum(),
        "true_positive": (mask * predicted * labels).sum(),
        "predicted_positive": (mask * predicted).sum(),
        "actual_positive": (mask * labels).sum(),
        "disc_logits": d(disc_logits),
        "labels": labels,
        "mask": mask,
    }


def metrics_from_sums(s: dict, recipe: dict) -> dict:
    """The original code's metric names from summed statistics (floats)."""
    ratio = lambda a, b: a / (b + EPSILON)  # noqa: E731
    mlm_loss, disc_loss = ratio(s["nll"], s["slots"]), ratio(s["disc_loss"], s["tokens"])
    return {
        "total_loss": recipe["gen_weight"] * mlm_loss + recipe["disc_weight"] * disc_loss,
        "masked_lm_loss": mlm_loss,
        "masked_lm_accuracy": ratio(s["correct"], s["slots"]),
        "sampled_masked_lm_accuracy": ratio(s["sampled_correct"], s["slots"]),
        "replaced_fraction": ratio(s["actual_positive"], s["tokens"]),
        "disc_loss": disc_loss,
        "disc_accuracy": ratio(s["disc_correct"], s["tokens"]),
        "disc_precision": ratio(s["true_positive"], s["predicted_positive"]),
        "disc_recall": ratio(s["true_positive"], s["actual_positive"]),
    }


SUM_NAMES = (
    "nll",
    "slots",
    "correct",
    "sampled_correct",
    "disc_loss",
    "tokens",
    "disc_correct",
    "true_positive",
    "predicted_positive",
    "actual_positive",
)


def batch_metrics(out: dict, recipe: dict) -> dict:
    """Metrics of one forward pass, with the AUC over its non-pad tokens."""
    metrics = metrics_from_sums({k: float(out[k]) for k in SUM_NAMES}, recipe)
    keep = out["mask"].numpy() > 0
    metrics["disc_auc"] = roc_auc(out["disc_logits"].numpy()[keep], out["labels"].numpy()[keep])
    return metrics


def evaluate(generator, discriminator, batches: list, recipe: dict) -> dict:
    """Held-out metrics without dropout, summed over all batches (AUC over all tokens)."""
    generator.eval()
    discriminator.eval()
    sums = dict.fromkeys(SUM_NAMES, 0.0)
    scores, labels = [], []
    with torch.no_grad():
        for batch in batches:
            out = forward(generator, discriminator, batch, recipe)
            for k in SUM_NAMES:
                sums[k] += float(out[k])
            keep = out["mask"].numpy() > 0
            scores.append(out["disc_logits"].numpy()[keep])
            labels.append(out["labels"].numpy()[keep])
    generator.train()
    discriminator.train()
    metrics = metrics_from_sums(sums, recipe)
    metrics["disc_auc"] = roc_auc(np.concatenate(scores), np.concatenate(labels))
    return metrics


def to_torch(arrays: dict, index: int, prefix: str = "") -> dict:
    """Batch `index` of the npz arrays as torch tensors (int64 ids, float32 weights)."""
    out = {}
    for key in BATCH_KEYS:
        value = torch.from_numpy(np.ascontiguousarray(arrays[prefix + key][index]))
        out[key] = value.float() if value.is_floating_point() else value.long()
    return out


def train(batches_path: str, settings: dict, output: str, seed: int) -> None:
    """Trains on every batch of `batches_path` in order, writing JSON lines to `output`."""
    torch.manual_seed(seed)
    recipe = settings["recipe"]
    arrays = dict(np.load(batches_path))
    num_steps = arrays["input_ids"].shape[0]
    eval_batches = [to_torch(arrays, i, "eval_") for i in range(arrays["eval_input_ids"].shape[0])]
    every = settings["eval_every_steps"]
    generator, discriminator = build_models(settings)
    if settings.get("initialisation") == "original":
        original_initialisation(generator, discriminator)
    generator.train()
    discriminator.train()
    optimizer = AdamWeightDecay(trainable_parameters(generator, discriminator), recipe)
    started, eval_seconds = time.perf_counter(), 0.0
    with open(output, "w", encoding="utf-8") as log:

        def log_eval(step):
            nonlocal eval_seconds
            eval_started = time.perf_counter()
            record = {
                "split": "eval",
                "step": step,
                **evaluate(generator, discriminator, eval_batches, recipe),
            }
            eval_seconds += time.perf_counter() - eval_started
            log.write(json.dumps(record) + "\n")
            log.flush()

        log_eval(0)
        for index in range(num_steps):
            out = forward(generator, discriminator, to_torch(arrays, index), recipe)
            for parameter in optimizer.parameters:
                parameter.grad = None
            out["loss"].backward()
            lr = optimizer.step()
            step = index + 1
            log.write(
                json.dumps(
                    {
                        "split": "train",
                        "step": step,
                        "learning_rate": lr,
                        **batch_metrics(out, recipe),
                    }
                )
                + "\n"
            )
            if step % every == 0 or step == num_steps:
                log_eval(step)
        seconds = time.perf_counter() - started
        log.write(
            json.dumps(
                {
                    "split": "summary",
                    "steps": num_steps,
                    "seconds": seconds,
                    "train_seconds": seconds - eval_seconds,
                    "eval_seconds": eval_seconds,
                    "torch": torch.__version__,
                    "threads": torch.get_num_threads(),
                }
            )
            + "\n"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--batches", required=True, help="the .npz of training and held-out batches"
    )
    parser.add_argument("--settings", required=True, help="the JSON of model and recipe settings")
    parser.add_argument("--output", required=True, help="where the JSON-lines metrics go")
    parser.add_argument("--seed", type=int, default=0, help="initial weights and dropout")
    parser.add_argument(
        "--threads", type=int, default=0, help="torch's intra-op threads (0: torch's default)"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with open(args.settings, encoding="utf-8") as f:
        settings = json.load(f)
    train(args.batches, settings, args.output, args.seed)


if __name__ == "__main__":
    main()
