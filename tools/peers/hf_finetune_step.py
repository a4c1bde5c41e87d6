"""Peer: an ELECTRA classification fine-tuning step with Hugging Face transformers (PyTorch).

Runs in its own virtualenv (torch + transformers; never a requirement of
electra-tf) and prints one JSON line with tokens per second over whole steps
after warm-up, for the same work as `python -m tools.benchmark
--mode=finetune`: the discriminator encoder, a classification head on [CLS],
softmax cross-entropy, AdamW with global-norm clipping at 1.0.

    python hf_finetune_step.py --size small --batch 32 --seq 128 --steps 10 [--lengths L.json]

Without `--lengths` every row is `--seq` tokens long. With it (a JSON list
of row lengths, the benchmark's rows), the rows are drawn in random order
and each batch is padded to its longest row, as transformers' `Trainer`
batches by default (`DataCollatorWithPadding`, no `group_by_length`);
tokens per second count the rows' own tokens, not the padding.
"""

import argparse
import json
import time

import torch
from transformers import ElectraConfig, ElectraForSequenceClassification

SIZES = {
    "tiny": dict(hidden=128, layers=4, heads=2, ffn=512, emb=128),
    "small": dict(hidden=256, layers=12, heads=4, ffn=1024, emb=128),
    "base": dict(hidden=768, layers=12, heads=12, ffn=3072, emb=768),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="small", choices=sorted(SIZES))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=30522)
    parser.add_argument("--num_labels", type=int, default=2)
    parser.add_argument("--lengths", help="JSON list of row lengths (default: all --seq)")
    args = parser.parse_args()
    torch.manual_seed(0)
    size = SIZES[args.size]
    config = ElectraConfig(
        vocab_size=args.vocab,
        embedding_size=size["emb"],
        hidden_size=size["hidden"],
        num_hidden_layers=size["layers"],
        num_attention_heads=size["heads"],
        intermediate_size=size["ffn"],
        max_position_embeddings=512,
        num_labels=args.num_labels,
    )
    model = ElectraForSequenceClassification(config)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0, eps=1e-6)
    if args.lengths:
        with open(args.lengths) as f:
            lengths = torch.tensor(json.load(f))
    else:
        lengths = torch.full((args.batch,), args.seq)
    order = torch.randperm(len(lengths), generator=torch.Generator().manual_seed(0))
    batches = []
    for start in range(0, len(order) - args.batch + 1, args.batch):
        rows = lengths[order[start : start + args.batch]]
        longest = int(rows.max())
        ids = torch.randint(5, args.vocab, (args.batch, longest))
        mask = (torch.arange(longest)[None, :] < rows[:, None]).long()
        labels = torch.randint(0, args.num_labels, (args.batch,))
        batches.append((ids * mask, mask, labels))
    counter = iter(range(10**9))

    def step():
        ids, mask, labels = batches[next(counter) % len(batches)]
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    for _ in range(args.warmup):
        step()
    window = [batches[i % len(batches)] for i in range(args.warmup, args.warmup + args.steps)]
    tokens = sum(int(mask.sum()) for _, mask, _ in window)
    positions = sum(mask.numel() for _, mask, _ in window)
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "peer": "hf-transformers-torch",
                "mode": "finetune",
                "size": args.size,
                "batch": args.batch,
                "seq": args.seq,
                "steps": args.steps,
                "seconds_per_step": seconds / args.steps,
                "tokens_per_second": tokens / seconds,
                "padding_fraction": 1 - tokens / positions,
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
            }
        )
    )


if __name__ == "__main__":
    main()
