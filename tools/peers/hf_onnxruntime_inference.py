"""Peer: raw text in, class probabilities out, with ONNX Runtime (the usual CPU serving path).

The same work as `hf_text_classification_inference.py` (whose arguments,
classifier and timing loop it uses): transformers' fast WordPiece tokenizer
from the same vocab.txt, the same ELECTRA classifier with the same random
weights, softmax; but the classifier is exported to ONNX and run by ONNX
Runtime, as most users serving a small encoder on CPUs run it:

* exported with `torch.onnx.export` (the TorchScript exporter, opset 17,
  dynamic batch and length), with transformers' `eager` attention
  (`--attention`), the matmul-softmax-matmul pattern that ONNX Runtime's
  optimizer fuses;
* rewritten by `onnxruntime.transformers.optimizer` for BERT-like models
  (`--optimizer=transformers`, the default): one `Attention` op per layer,
  `SkipLayerNormalization`, `BiasGelu`, `EmbedLayerNormalization`;
* run with every graph optimisation of the session on
  (`ORT_ENABLE_ALL`), on the CPU execution provider.

Runs in its own virtualenv (torch, transformers, onnx, onnxscript,
onnxruntime; never requirements of electra-tf) and prints one JSON line with
the keys of the PyTorch peer, the fused ops of the graph it ran, and the
largest difference between its probabilities and PyTorch's on one batch (it
refuses to time a graph that computes something else).

    python hf_onnxruntime_inference.py --vocab_file vocab.txt --texts texts.txt \
        --size small --seq 128 --batch 32 [--threads N]

`--threads N` sets ONNX Runtime's intra-op and inter-op threads to N (0: its
default, one per physical core).
"""

import collections
import json
import os
import tempfile

import numpy as np
import onnx
import onnxruntime
import torch
from hf_finetune_step import SIZES
from hf_text_classification_inference import arguments, classifier, read_texts, time_predictions
from transformers import ElectraTokenizerFast

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# Agreement with PyTorch required before timing: float32 rounding, not another function.
TOLERANCE = 1e-4


def export(model, encoded, directory: str, optimizer: str, size: str) -> str:
    """Writes `model` as ONNX into `directory`, optimised by `optimizer`; returns the path."""
    path = os.path.join(directory, "classifier.onnx")
    with torch.no_grad():
        torch.onnx.export(
            model,
            tuple(encoded[name] for name in INPUTS),
            path,
            input_names=list(INPUTS),
            output_names=["logits"],
            dynamic_axes={
                **{name: {0: "batch", 1: "length"} for name in INPUTS},
                "logits": {0: "batch"},
            },
            opset_version=17,
            dynamo=False,
        )
    if optimizer == "none":
        return path
    from onnxruntime.transformers.optimizer import optimize_model

    shape = SIZES[size]
    optimized = optimize_model(
        path, model_type="bert", num_heads=shape["heads"], hidden_size=shape["hidden"]
    )
    path = os.path.join(directory, "classifier.optimized.onnx")
    optimized.save_model_to_file(path)
    return path


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


def main():
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument(
        "--attention",
        default="eager",
        choices=["eager", "sdpa"],
        help="transformers' attention implementation exported (eager: fusable by ONNX Runtime)",
    )
    parser.add_argument(
        "--optimizer",
        default="transformers",
        choices=["transformers", "none"],
        help="transformers: onnxruntime.transformers.optimizer's fusions; none: the session's own",
    )
    args = parser.parse_args()
    texts = read_texts(args.texts)
    tokenizer = ElectraTokenizerFast(vocab_file=args.vocab_file, do_lower_case=True)
    model = classifier(args, tokenizer.vocab_size, attention=args.attention)

    def encode(batch, tensors):
        return tokenizer(
            batch, padding="longest", truncation=True, max_length=args.seq, return_tensors=tensors
        )

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    if args.threads:
        options.intra_op_num_threads = args.threads
        options.inter_op_num_threads = args.threads
    with tempfile.TemporaryDirectory() as directory:
        path = export(model, encode(texts[:2], "pt"), directory, args.optimizer, args.size)
        ops = collections.Counter(node.op_type for node in onnx.load(path).graph.node)
        session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def predict(batch):
        encoded = encode(batch, "np")
        feeds = {name: encoded[name].astype(np.int64) for name in INPUTS}
        return softmax(session.run(None, feeds)[0])

    batch = texts[: args.batch]
    with torch.inference_mode():
        expected = torch.softmax(model(**encode(batch, "pt")).logits, -1).numpy()
    difference = float(np.abs(predict(batch) - expected).max())
    if not difference <= TOLERANCE:
        raise SystemExit(
            f"ONNX Runtime's probabilities differ from PyTorch's by {difference:.3g} "
            f"(over {TOLERANCE}): the exported graph computes something else."
        )
    timings = time_predictions(predict, texts, args)
    print(
        json.dumps(
            {
                "peer": "hf-onnxruntime",
                "mode": "inference",
                "size": args.size,
                "seq": args.seq,
                "batch": args.batch,
                **timings,
                "onnxruntime": onnxruntime.__version__,
                "torch": torch.__version__,
                "attention": args.attention,
                "optimizer": args.optimizer,
                "fused_ops": {
                    op: ops[op]
                    for op in (
                        "Attention",
                        "SkipLayerNormalization",
                        "BiasGelu",
                        "EmbedLayerNormalization",
                    )
                    if ops[op]
                },
                "graph_nodes": sum(ops.values()),
                "max_abs_difference_vs_torch": difference,
                "threads": args.threads or "default",
            }
        )
    )


if __name__ == "__main__":
    main()
