"""Serving exported models with TensorFlow Serving.

Modules:
    layout        `<export_base>/<model_name>/<version>/` directories, published atomically
    text          packing raw text into model inputs with graph ops (matches `finetuning.features`)
    classifier    signatures of a fine-tuned classifier or regressor
    discriminator signatures of a pre-trained discriminator (replaced-token probabilities)
    exporter      writing a SavedModel version from a fine-tuning or pre-training run
    check         loading an export in a fresh process, as TF Serving would, and comparing
    client        REST and gRPC clients for TF Serving
    predict       the `predict` command: through a server, or from a SavedModel without one
"""
