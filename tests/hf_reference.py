"""Runs a Hugging Face ELECTRA directory with `transformers` (PyTorch) on saved inputs.

Standalone on purpose: it imports only NumPy, torch and transformers, so it
can run in an interpreter that has them and not electra-tf.

    python hf_reference.py <hf_dir> <inputs.npz> <outputs.npz>

inputs.npz: input_ids, input_mask, segment_ids (int [B, L]) and, for the
generator, masked_lm_positions (int [B, N]). outputs.npz: `disc_logits`
[B, L] from ElectraForPreTraining(<hf_dir>) and, when <hf_dir>/generator
exists, `gen_logits` [B, N, V] from ElectraForMaskedLM at those positions;
for an ElectraForTokenClassification directory, `token_logits` [B, L, T]
and `labels` (its id2label, in id order); for an
ElectraForSequenceClassification directory, `sequence_logits` [B, C],
`labels` and `problem_type`; for an ElectraForQuestionAnswering directory,
`start_logits` and `end_logits` [B, L]; for an ElectraForMultipleChoice directory (inputs
int [B, O, L]), `choice_logits` [B, O].
"""

import json
import os
import sys

import numpy as np


def run(hf_dir: str, inputs_file: str, outputs_file: str) -> None:
    import torch
    from transformers import (
        ElectraForMaskedLM,
        ElectraForMultipleChoice,
        ElectraForPreTraining,
        ElectraForQuestionAnswering,
        ElectraForSequenceClassification,
        ElectraForTokenClassification,
    )

    data = np.load(inputs_file)
    kwargs = {
        "input_ids": torch.tensor(data["input_ids"], dtype=torch.long),
        "attention_mask": torch.tensor(data["input_mask"], dtype=torch.long),
        "token_type_ids": torch.tensor(data["segment_ids"], dtype=torch.long),
    }
    out = {}
    with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
        architectures = json.load(f).get("architectures") or []
    if "ElectraForSequenceClassification" in architectures:
        with torch.no_grad():
            classifier = ElectraForSequenceClassification.from_pretrained(hf_dir).eval()
            out["sequence_logits"] = classifier(**kwargs).logits.numpy()
        labels = classifier.config.id2label
        out["labels"] = np.array([labels[i] for i in range(len(labels))])
        out["problem_type"] = np.array(str(classifier.config.problem_type))
        np.savez(outputs_file, **out)
        return
    if "ElectraForMultipleChoice" in architectures:
        with torch.no_grad():
            chooser = ElectraForMultipleChoice.from_pretrained(hf_dir).eval()
            out["choice_logits"] = chooser(**kwargs).logits.numpy()
        np.savez(outputs_file, **out)
        return
    if "ElectraForQuestionAnswering" in architectures:
        with torch.no_grad():
            qa = ElectraForQuestionAnswering.from_pretrained(hf_dir).eval()
            outputs = qa(**kwargs)
        out["start_logits"] = outputs.start_logits.numpy()
        out["end_logits"] = outputs.end_logits.numpy()
        np.savez(outputs_file, **out)
        return
    if "ElectraForTokenClassification" in architectures:
        with torch.no_grad():
            tagger = ElectraForTokenClassification.from_pretrained(hf_dir).eval()
            out["token_logits"] = tagger(**kwargs).logits.numpy()
        labels = tagger.config.id2label
        out["labels"] = np.array([labels[i] for i in range(len(labels))])
        np.savez(outputs_file, **out)
        return
    with torch.no_grad():
        disc = ElectraForPreTraining.from_pretrained(hf_dir).eval()
        out["disc_logits"] = disc(**kwargs).logits.numpy()
        gen_dir = os.path.join(hf_dir, "generator")
        if os.path.isdir(gen_dir):
            gen = ElectraForMaskedLM.from_pretrained(gen_dir).eval()
            logits = gen(**kwargs).logits.numpy()  # [B, L, V]
            positions = data["masked_lm_positions"]
            out["gen_logits"] = np.take_along_axis(logits, positions[:, :, None], axis=1)
    np.savez(outputs_file, **out)


if __name__ == "__main__":
    run(*sys.argv[1:4])
