"""Serving exported models with TensorFlow Serving.

Modules:
    text          packing raw text into model inputs with graph ops (matches `finetuning.features`)
    classifier    signatures of a fine-tuned classifier or regressor
    discriminator signatures of a pre-trained discriminator (replaced-token probabilities)
    question_answering signatures of a SQuAD model (answer text and offsets from raw text)
    exporter      writing a SavedModel version from a fine-tuning or pre-training run
    check         loading an export in a fresh process, as TF Serving would, and comparing
    check_qa      the check's question/context requests and their expected answers
    check_requests tensors as the JSON the check's fresh process reads and writes
    client        REST and gRPC clients for TF Serving
    predict       predictions for a file: through a server, or from a SavedModel without one
"""
