"""Peer: raw text in, class probabilities out, with Hugging Face transformers (PyTorch).

Runs in its own virtualenv (torch + transformers; never a requirement of
electra-tf) and prints one JSON line: the median latency of single-text
requests and the throughput of batches, for the same work as `python -m
tools.benchmark --mode=inference`: WordPiece tokenization (the fast
tokenizer, from the same vocab.txt), an ELECTRA classifier, softmax.

    python hf_text_classification_inference.py --vocab_file vocab.txt --texts texts.txt \
        --size small --seq 128 --batch 32 [--threads N]

`--threads N` sets PyTorch's intra-op and inter-op threads to N (0: its
default, one per core), as the benchmark sets TensorFlow's.

`hf_onnxruntime_inference.py` runs the same classifier through ONNX Runtime
and imports the arguments, the model and the timing loop from here, so the
two peers differ only in what runs the model.
"""

import argparse
import json
import statistics
import time

import torch
from hf_finetune_step import SIZES
from transformers import ElectraConfig, ElectraForSequenceClassification, ElectraTokenizerFast


def arguments(description: str) -> argparse.ArgumentParser:
    """The arguments every inference peer takes (the benchmark passes them all)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--vocab_file", required=True)
    parser.add_argument("--texts", required=True, help="a text per line")
    parser.add_argument("--size", default="small", choices=sorted(SIZES))
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--requests", type=int, default=100, help="single-text requests timed")
    parser.add_argument("--batches", type=int, default=10, help="batches timed")
    parser.add_argument("--num_labels", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="0: the library's default")
    return parser


def read_texts(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def classifier(args, vocab_size: int, attention: str = "sdpa"):
    """An ELECTRA classifier of `args.size` with random weights (seed 0), in eval mode.

    `attention` is transformers' attention implementation: "sdpa" (its
    default, PyTorch's fused kernel) or "eager" (matmul, softmax, matmul:
    the pattern ONNX Runtime's transformer optimizer fuses into one op).
    """
    torch.manual_seed(0)
    size = SIZES[args.size]
    config = ElectraConfig(
        vocab_size=vocab_size,
        embedding_size=size["emb"],
        hidden_size=size["hidden"],
        num_hidden_layers=size["layers"],
        num_attention_heads=size["heads"],
        intermediate_size=size["ffn"],
        max_position_embeddings=512,
        num_labels=args.num_labels,
    )
    config._attn_implementation = attention
    return ElectraForSequenceClassification(config).eval()


def time_predictions(predict, texts: list, args) -> dict:
    """Median single-text latency and batched throughput of `predict(list of texts)`.

    Five warm-up rounds of one text and one batch first; then `args.requests`
    single texts one at a time, then `args.batches` batches of `args.batch`
    texts (the benchmark's own loop, tools/latency.py, in the same order).
    """
    for i in range(5):
        predict(texts[i : i + 1])
        predict(texts[: args.batch])
    latencies = []
    for i in range(args.requests):
        start = time.perf_counter()
        predict([texts[i % len(texts)]])
        latencies.append(time.perf_counter() - start)
    start = time.perf_counter()
    for i in range(args.batches):
        first = (i * args.batch) % max(1, len(texts) - args.batch)
        predict(texts[first : first + args.batch])
    seconds = time.perf_counter() - start
    return {
        "latency_ms_batch1_median": 1000 * statistics.median(latencies),
        "texts_per_second_batched": args.batch * args.batches / seconds,
    }


def main():
    args = arguments(__doc__.splitlines()[0]).parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(args.threads)
    texts = read_texts(args.texts)
    tokenizer = ElectraTokenizerFast(vocab_file=args.vocab_file, do_lower_case=True)
    model = classifier(args, tokenizer.vocab_size)

    @torch.inference_mode()
    def predict(batch):
        encoded = tokenizer(
            batch, padding="longest", truncation=True, max_length=args.seq, return_tensors="pt"
        )
        return torch.softmax(model(**encoded).logits, -1).numpy()

    timings = time_predictions(predict, texts, args)
    print(
        json.dumps(
            {
                "peer": "hf-transformers-torch",
                "mode": "inference",
                "size": args.size,
                "seq": args.seq,
                "batch": args.batch,
                **timings,
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
            }
        )
    )


if __name__ == "__main__":
    main()
