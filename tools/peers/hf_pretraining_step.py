"""Peer anchor: ELECTRA replaced-token-detection pretraining steps with HuggingFace
transformers (PyTorch, CPU). Prints tokens/s of full train steps (generator MLM +
sampling + discriminator + AdamW update), same shapes as the project's benchmark.

usage: python tools/peers/hf_pretraining_step.py [--size small] [--batch 32] [--seq 128] [--steps 10]
"""

import argparse
import json
import time

import torch
from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

SIZES = {  # discriminator dims; generator = hidden * gen_frac (official: small 1/4, base/large 1/3)
    "tiny": dict(hidden=128, layers=4, heads=2, ffn=512, emb=128, gen_frac=0.25),
    "small": dict(hidden=256, layers=12, heads=4, ffn=1024, emb=128, gen_frac=0.25),
    "base": dict(hidden=768, layers=12, heads=12, ffn=3072, emb=768, gen_frac=1 / 3),
}


def build(size, vocab, seq):
    s = SIZES[size]
    gh = int(s["hidden"] * s["gen_frac"])
    gen_cfg = ElectraConfig(
        vocab_size=vocab,
        embedding_size=s["emb"],
        hidden_size=gh,
        num_hidden_layers=s["layers"],
        num_attention_heads=max(1, s["heads"] * gh // s["hidden"]),
        intermediate_size=s["ffn"] * gh // s["hidden"],
        max_position_embeddings=512,
    )
    disc_cfg = ElectraConfig(
        vocab_size=vocab,
        embedding_size=s["emb"],
        hidden_size=s["hidden"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        intermediate_size=s["ffn"],
        max_position_embeddings=512,
    )
    gen = ElectraForMaskedLM(gen_cfg)
    disc = ElectraForPreTraining(disc_cfg)
    # share token + position + type embeddings (the paper's default)
    gen.electra.embeddings = disc.electra.embeddings
    gen.generator_lm_head.weight = disc.electra.embeddings.word_embeddings.weight
    return gen, disc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="small")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--mask_prob", type=float, default=0.15)
    ap.add_argument("--disc_weight", type=float, default=50.0)
    a = ap.parse_args()
    torch.manual_seed(0)
    gen, disc = build(a.size, a.vocab, a.seq)
    params = list({id(p): p for p in list(gen.parameters()) + list(disc.parameters())}.values())
    opt = torch.optim.AdamW(params, lr=5e-4, weight_decay=0.01)
    mask_id = 103
    ids = torch.randint(1000, a.vocab, (a.batch, a.seq))
    attn = torch.ones_like(ids)

    def step():
        masked = torch.rand(ids.shape) < a.mask_prob
        inp = ids.masked_fill(masked, mask_id)
        labels = ids.masked_fill(~masked, -100)
        g = gen(input_ids=inp, attention_mask=attn, labels=labels)
        with torch.no_grad():
            logits = g.logits[masked]
            sampled = torch.multinomial(torch.softmax(logits, -1), 1).squeeze(-1)
        corrupt = inp.clone()
        corrupt[masked] = sampled
        is_replaced = (corrupt != ids).long()
        d = disc(input_ids=corrupt, attention_mask=attn, labels=is_replaced)
        loss = g.loss + a.disc_weight * d.loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    dt = time.perf_counter() - t0
    tok_s = a.batch * a.seq * a.steps / dt
    print(
        json.dumps(
            {
                "peer": "hf-transformers-torch",
                "size": a.size,
                "batch": a.batch,
                "seq": a.seq,
                "steps": a.steps,
                "sec_per_step": dt / a.steps,
                "tokens_per_sec": tok_s,
                "threads": torch.get_num_threads(),
            }
        )
    )


if __name__ == "__main__":
    main()
