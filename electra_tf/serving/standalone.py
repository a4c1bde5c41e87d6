"""Loads a SavedModel the way TF Serving does and runs requests on it.

This file is run as a script in a fresh interpreter (`python -I`, so neither
the current directory nor PYTHONPATH is on `sys.path`; an installed copy of
the project is blocked) and imports only the standard library, NumPy,
TensorFlow and TensorFlow Text, never the project:
an export that needs project code to load would fail here, as it would in
TF Serving.

    python -I standalone.py <version_dir> <requests.json> <result.json>

`requests.json`: `{"requests": [{"signature": name, "inputs": {name: {"dtype":
"string" | "int32" | ..., "values": nested lists, strings base64}},
"expect_error": bool}], "benchmark": {"requests": N, "batch_sizes": [1, 32],
"text": base64, "texts": {input name: base64} (optional)}}`.

`result.json`: the project-importability probe, import and load times, the
`saved_model_cli show --all`-style listing, the TF Text ops in the graph,
every request's outputs (or error) and the benchmark latencies.
"""

import base64
import importlib.util
import json
import sys
import time

PROJECT_PACKAGE = "electra_tf"
# TF Text kernels that TF Serving 2.12 to 2.19 bundle (TF Text 2.12.1) and that
# the raw-text signatures may use. TF Serving 2.20 bundles TF Text 2.20.0,
# which has all of them too.
SERVING_TEXT_OPS = {
    "CaseFoldUTF8",
    "NormalizeUTF8",
    "RegexSplitWithOffsets",
    "WordpieceTokenizeWithOffsets",
    "FastWordpieceTokenizeWithOffsets",
}


def _encode(array):
    """A NumPy result as JSON: {"dtype", "shape", "values"}; bytes base64-encoded."""
    import numpy as np

    array = np.asarray(array)
    if array.dtype.kind in ("S", "O", "U"):
        values = [
            base64.b64encode(v if isinstance(v, bytes) else str(v).encode()).decode()
            for v in array.reshape(-1).tolist()
        ]
        return {"dtype": "string", "shape": list(array.shape), "values": values}
    return {
        "dtype": str(array.dtype),
        "shape": list(array.shape),
        "values": array.reshape(-1).tolist(),
    }


def _decode(spec):
    import numpy as np
    import tensorflow as tf

    if spec["dtype"] == "string":

        def walk(value):
            return [walk(v) for v in value] if isinstance(value, list) else base64.b64decode(value)

        return tf.constant(np.array(walk(spec["values"]), dtype=object), tf.string)
    return tf.constant(np.array(spec["values"], dtype=spec["dtype"]))


def _tensor_shape(proto):
    if proto.unknown_rank:
        return "unknown_rank"
    return "(" + ", ".join(str(d.size) for d in proto.dim) + ")"


def describe(version_dir):
    """`saved_model_cli show --all`-like text and the graph's op types."""
    from tensorflow.core.framework import types_pb2
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(f"{version_dir}/saved_model.pb", "rb") as f:
        saved_model.ParseFromString(f.read())
    lines, ops, signatures = [], set(), {}
    for meta_graph in saved_model.meta_graphs:
        tags = list(meta_graph.meta_info_def.tags)
        lines.append(f"MetaGraphDef with tag-set: {tags!r} contains the following SignatureDefs:")
        for name in sorted(meta_graph.signature_def):
            signature = meta_graph.signature_def[name]
            lines.append(f"\nsignature_def['{name}']:")
            entry = {"inputs": {}, "outputs": {}, "method_name": signature.method_name}
            for kind in ("inputs", "outputs"):
                lines.append(
                    f"  The given SavedModel SignatureDef contains the following {kind[:-1]}(s):"
                )
                for key in sorted(getattr(signature, kind)):
                    info = getattr(signature, kind)[key]
                    dtype = types_pb2.DataType.Name(info.dtype)
                    shape = _tensor_shape(info.tensor_shape)
                    entry[kind][key] = {"dtype": dtype, "shape": shape}
                    lines.append(f"    {kind}['{key}'] tensor_info:")
                    lines.append(f"        dtype: {dtype}")
                    lines.append(f"        shape: {shape}")
                    lines.append(f"        name: {info.name}")
            lines.append(f"  Method name is: {signature.method_name}")
            signatures[name] = entry
        ops |= {node.op for node in meta_graph.graph_def.node}
        ops |= {
            node.op
            for function in meta_graph.graph_def.library.function
            for node in function.node_def
        }
    return "\n".join(lines), sorted(ops), signatures


def main(version_dir, requests_path, result_path):
    # The project may be installed in this interpreter's site-packages: block
    # its import, so that a SavedModel needing it fails here as in TF Serving.
    sys.modules[PROJECT_PACKAGE] = None
    result = {
        "project_importable": importlib.util.find_spec(PROJECT_PACKAGE) is not None,
        "sys_path": sys.path,
    }
    started = time.perf_counter()
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.framework import op_def_registry

    listing, ops, signatures = describe(version_dir)
    # Ops TensorFlow itself does not register are the TF Text kernels.
    result["custom_ops"] = sorted(op for op in ops if op_def_registry.get(op) is None)
    result["unsupported_ops"] = sorted(set(result["custom_ops"]) - SERVING_TEXT_OPS)
    import tensorflow_text  # noqa: F401  (registers the tokenizer kernels)

    result["import_seconds"] = time.perf_counter() - started
    result["listing"] = listing
    result["signatures"] = signatures
    started = time.perf_counter()
    loaded = tf.saved_model.load(version_dir, tags=["serve"])
    result["load_seconds"] = time.perf_counter() - started

    with open(requests_path, encoding="utf-8") as f:
        spec = json.load(f)
    responses = []
    for request in spec.get("requests", []):
        function = loaded.signatures[request["signature"]]
        try:
            inputs = {k: _decode(v) for k, v in request["inputs"].items()}
            outputs = function(**inputs)
            responses.append({"outputs": {k: _encode(v.numpy()) for k, v in outputs.items()}})
        except Exception as error:  # noqa: BLE001  (recorded as the request's error)
            responses.append({"error": f"{type(error).__name__}: {str(error)[:500]}"})
    result["responses"] = responses

    bench = spec.get("benchmark")
    if bench:
        function = loaded.signatures["serving_default"]
        names = list(function.structured_input_signature[1])
        # One text for every input, unless the request names a text (or a row of texts:
        # options, words) per input.
        given = {n: bench.get("texts", {}).get(n, bench["text"]) for n in names}
        texts = {
            n: [base64.b64decode(t) for t in v] if isinstance(v, list) else base64.b64decode(v)
            for n, v in given.items()
        }
        timings = {}
        first_call = None
        for batch in bench["batch_sizes"]:
            inputs = {n: tf.constant([texts[n]] * batch) for n in names}
            begin = time.perf_counter()
            function(**inputs)  # the first call of a shape pays for kernel set-up
            if first_call is None:
                first_call = time.perf_counter() - begin
            samples = []
            for _ in range(bench["requests"]):
                begin = time.perf_counter()
                outputs = function(**inputs)
                [v.numpy() for v in outputs.values()]
                samples.append(1000 * (time.perf_counter() - begin))
            timings[str(batch)] = {
                "p50_ms": float(np.percentile(samples, 50)),
                "p99_ms": float(np.percentile(samples, 99)),
                "mean_ms": float(np.mean(samples)),
                "requests": len(samples),
            }
        result["first_call_seconds"] = first_call
        result["latency"] = timings

    with open(result_path, "w", encoding="utf-8") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:4])
