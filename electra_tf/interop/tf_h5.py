"""`transformers`' TensorFlow weights (`tf_model.h5`) as a PyTorch-style state dict of NumPy arrays.

`TFElectra*.save_pretrained` writes Keras 2's HDF5 weights layout: the root's
`layer_names` attribute lists the top-level layers (`electra`,
`discriminator_predictions`, `generator_predictions`, `generator_lm_head`,
`classifier`), and each layer's group holds its variables as datasets under
their full names, e.g.

    electra/tf_electra_for_pre_training/electra/encoder/layer_._0/attention/self/query/kernel:0

(a variable another layer also uses, such as the word embeddings that
`generator_lm_head` reads, is stored again in that layer's group). The name
without the layer group and the model's own scope (`tf_electra_model`,
`tf_electra_for_pre_training`, ...) is the PyTorch key once `layer_._<i>`
becomes `layer.<i>`, the last part `weight` or `bias` (`kernel`, `gamma`,
`embeddings` -> `weight`; `beta` -> `bias`) and `/` `.`; dense kernels are
[in, out] there and [out, in] in PyTorch.

The file is untrusted: datasets are only read (h5py never runs code from a
file), and only plain ones: floating point, stored in the file itself,
unfiltered, and no larger than the file. Links are not followed.
"""

from __future__ import annotations

import os
import re

import numpy as np


class TFWeightsError(ValueError):
    """A `tf_model.h5` is refused; the message is one line naming the file and the reason."""


_LAST_PART = {"kernel": "weight", "gamma": "weight", "beta": "bias", "embeddings": "weight"}


def pytorch_key(name: str) -> tuple[str, bool]:
    """A transformers TF variable name -> (PyTorch state-dict key, whether to transpose).

    `tf_electra_for_pre_training/electra/encoder/layer_._0/output/dense/kernel:0`
    -> (`electra.encoder.layer.0.output.dense.weight`, True).
    """
    parts = re.sub(r":\d+$", "", name).split("/")[1:]  # without the model's scope
    if not parts:
        raise ValueError(f"variable name {name!r} has no scope")
    parts = [re.sub(r"^(\w+)_\._(\d+)$", r"\1/\2", p) for p in parts]
    last = parts[-1]
    parts[-1] = _LAST_PART.get(last, last)
    return "/".join(parts).replace("/", "."), last == "kernel"


def _shown(text: str) -> str:
    text = text if len(text) <= 120 else text[:120] + "..."
    return text if text.isprintable() else ascii(text)


def _dataset_array(where: str, name: str, dataset, file_size: int) -> np.ndarray:
    """A dataset's values, after checking that it is a plain float array inside the file."""
    what = f"{where}: dataset {_shown(name)}"
    if dataset.shape is None or dataset.dtype.kind != "f":
        raise TFWeightsError(f"{what} holds {dataset.dtype}, not floating-point weights")
    if dataset.is_virtual:
        raise TFWeightsError(f"{what} is a virtual dataset; Keras writes plain ones")
    plist = dataset.id.get_create_plist()
    if plist.get_external_count() > 0:
        raise TFWeightsError(f"{what} keeps its values in another file; Keras writes them inline")
    if plist.get_nfilters() > 0:
        raise TFWeightsError(f"{what} is compressed or filtered; Keras writes plain datasets")
    nbytes = int(np.prod(dataset.shape, dtype=object)) * dataset.dtype.itemsize
    if nbytes > file_size or dataset.id.get_storage_size() < nbytes:
        raise TFWeightsError(
            f"{what} claims {nbytes} bytes (shape {dataset.shape}); the file stores "
            f"{dataset.id.get_storage_size()} of them ({file_size} in all)"
        )
    try:
        return np.asarray(dataset[()])
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as error:
        raise TFWeightsError(f"{what}: cannot read ({_shown(str(error))})")


def read_tf_weights(path: str) -> dict[str, np.ndarray]:
    """Reads a `tf_model.h5` written by transformers' `TFElectra*.save_pretrained`.

    Returns:
        PyTorch state-dict key -> array, dense kernels transposed to [out, in].

    Raises:
        TFWeightsError: not that layout, or a dataset that is not plain weights.
        OSError: the file cannot be read.
    """
    import h5py

    file_size = os.path.getsize(path)
    try:
        handle = h5py.File(path, "r")
    except OSError as error:
        raise TFWeightsError(f"{path}: not an HDF5 file ({_shown(str(error))})")
    with handle:
        layers = handle.attrs.get("layer_names")
        if layers is None:
            raise TFWeightsError(
                f"{path}: no `layer_names` attribute; not the Keras 2 HDF5 weights that "
                "transformers' TF models save"
            )
        # (variable name, dataset) in every layer's group; a shared variable comes twice.
        datasets: list = []
        for layer in layers:
            layer = layer.decode("utf-8") if isinstance(layer, bytes) else str(layer)
            link = handle.get(layer, getlink=True) if "/" not in layer else None
            if not isinstance(link, h5py.HardLink) or not isinstance(handle[layer], h5py.Group):
                raise TFWeightsError(f"{path}: layer {_shown(layer)} is not a group of this file")
            handle[layer].visititems(  # follows hard links only
                lambda name, item: (
                    datasets.append((name, item)) if isinstance(item, h5py.Dataset) else None
                )
            )
        state: dict[str, np.ndarray] = {}
        sources: dict[str, str] = {}
        for name, dataset in datasets:
            try:
                key, transpose = pytorch_key(name)
            except ValueError as error:
                raise TFWeightsError(f"{path}: {error}")
            value = _dataset_array(path, name, dataset, file_size)
            if transpose:
                if value.ndim != 2:
                    raise TFWeightsError(f"{path}: kernel {_shown(name)} is not a matrix")
                value = value.T
            if key in state:
                if state[key].shape != value.shape or not np.array_equal(state[key], value):
                    raise TFWeightsError(
                        f"{path}: {_shown(name)} and {_shown(sources[key])} both give {key} "
                        "but differ"
                    )
                continue
            state[key], sources[key] = np.ascontiguousarray(value), name
    if not state:
        raise TFWeightsError(f"{path}: no weights under its layers")
    return state
