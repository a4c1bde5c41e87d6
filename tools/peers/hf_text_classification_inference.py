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
"""

import argparse
import json
import statistics
import time

import torch
from hf_finetune_step import SIZES
from transformers import ElectraConfig, ElectraForSequenceClassification, ElectraTokenizerFast


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--vocab_file", required=True)
    parser.add_argument("--texts", required=True, help="a text per line")
    parser.add_argument("--size", default="small", choices=sorted(SIZES))
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--requests", type=int, default=100, help="single-text requests timed")
    parser.add_argument("--batches", type=int, default=10, help="batches timed")
    parser.add_argument("--num_labels", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="0: PyTorch's default")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(args.threads)
    torch.manual_seed(0)
    with open(args.texts, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f if line.strip()]
    tokenizer = ElectraTokenizerFast(vocab_file=args.vocab_file, do_lower_case=True)
    size = SIZES[args.size]
    config = ElectraConfig(
        vocab_size=tokenizer.vocab_size,
        embedding_size=size["emb"],
        hidden_size=size["hidden"],
        num_hidden_layers=size["layers"],
        num_attention_heads=size["heads"],
        intermediate_size=size["ffn"],
        max_position_embeddings=512,
        num_labels=args.num_labels,
    )
    model = ElectraForSequenceClassification(config).eval()

    @torch.inference_mode()
    def predict(batch):
        encoded = tokenizer(
            batch, padding="longest", truncation=True, max_length=args.seq, return_tensors="pt"
        )
        return torch.softmax(model(**encoded).logits, -1).numpy()

    for i in range(5):  # warm-up
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
    print(
        json.dumps(
            {
                "peer": "hf-transformers-torch",
                "mode": "inference",
                "size": args.size,
                "seq": args.seq,
                "batch": args.batch,
                "latency_ms_batch1_median": 1000 * statistics.median(latencies),
                "texts_per_second_batched": args.batch * args.batches / seconds,
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
            }
        )
    )


if __name__ == "__main__":
    main()
