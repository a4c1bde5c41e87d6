"""Peer: an ELECTRA classification fine-tuning step with Hugging Face transformers (PyTorch).

Runs in its own virtualenv (torch + transformers; never a requirement of
electra-tf) and prints one JSON line with tokens per second over whole steps
after warm-up, for the same work as `python -m tools.benchmark
--mode=finetune`: the discriminator encoder, a classification head on [CLS],
softmax cross-entropy, AdamW with global-norm clipping at 1.0.

    python hf_finetune_step.py --size small --batch 32 --seq 128 --steps 10
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
    ids = torch.randint(5, args.vocab, (args.batch, args.seq))
    mask = torch.ones_like(ids)
    labels = torch.randint(0, args.num_labels, (args.batch,))

    def step():
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    for _ in range(args.warmup):
        step()
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
                "tokens_per_second": args.batch * args.seq * args.steps / seconds,
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
            }
        )
    )


if __name__ == "__main__":
    main()
