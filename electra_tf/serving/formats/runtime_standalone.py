"""Runs token-id requests on `model.onnx` (ONNX Runtime) or `model.tflite` (LiteRT).

This file is run as a script in a fresh interpreter (`python -I`) and imports
only the standard library, NumPy and the runtime (`onnxruntime`, or
`ai_edge_litert`), never TensorFlow or the project, as a deployment would:

    python -I runtime_standalone.py <onnx|litert> <model file> <version_dir> \\
        <requests.json> <result.json>

`requests.json`: `{"requests": [{"inputs": {name: {"dtype": "int32",
"values": nested lists}}}], "benchmark": null}`. `result.json`: the
project-importability probe, import and load times, the model's input and
output names, and every request's outputs (`{"dtype", "shape", "values"}`,
strings base64) or error.
"""

import base64
import importlib.util
import json
import os
import sys
import time

PROJECT_PACKAGE = "electra_tf"


def _encode(array):
    """An output as JSON; strings (ONNX Runtime's str, LiteRT's bytes) base64 of their UTF-8."""
    import numpy as np

    array = np.asarray(array)
    if array.dtype.kind in ("S", "O", "U"):
        values = [
            base64.b64encode(v if isinstance(v, bytes) else str(v).encode("utf-8")).decode()
            for v in array.reshape(-1).tolist()
        ]
        return {"dtype": "string", "shape": list(array.shape), "values": values}
    return {
        "dtype": str(array.dtype),
        "shape": list(array.shape),
        "values": array.reshape(-1).tolist(),
    }


def _onnx_runner(path):
    """(input names, output names, run(feed) -> {name: array}) of an ONNX Runtime session."""
    import onnxruntime

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    inputs = [i.name for i in session.get_inputs()]
    outputs = [o.name for o in session.get_outputs()]
    return inputs, outputs, lambda feed: dict(zip(outputs, session.run(None, feed)))


def _litert_runner(path):
    """(input names, output names, run(feed) -> {name: array}) of the model's one signature."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=path)
    (key, signature), *_ = interpreter.get_signature_list().items()
    runner = interpreter.get_signature_runner(key)
    return list(signature["inputs"]), list(signature["outputs"]), lambda feed: runner(**feed)


RUNNERS = {"onnx": _onnx_runner, "litert": _litert_runner}


def main(runtime, model_file, version_dir, requests_path, result_path):
    # The project may be installed in this interpreter's site-packages: block its
    # import, so that a check needing it fails here as on a machine without it.
    sys.modules[PROJECT_PACKAGE] = None
    project_importable = importlib.util.find_spec(PROJECT_PACKAGE) is not None
    start = time.perf_counter()
    import numpy as np

    make_runner = RUNNERS[runtime]
    with open(requests_path, encoding="utf-8") as f:
        requests = json.load(f)["requests"]
    inputs, outputs, run = make_runner(os.path.join(version_dir, model_file))
    loaded = time.perf_counter()
    responses = []
    for request in requests:
        feed = {
            name: np.asarray(spec["values"], dtype=spec["dtype"])
            for name, spec in request["inputs"].items()
        }
        try:
            answer = run(feed)
        except Exception as error:  # any runtime error is reported, not raised
            responses.append({"error": f"{type(error).__name__}: {error}"[:2000]})
            continue
        responses.append({"outputs": {name: _encode(value) for name, value in answer.items()}})
    result = {
        "project_importable": project_importable,
        "load_seconds": loaded - start,
        "inputs": inputs,
        "outputs": outputs,
        "responses": responses,
    }
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:6])
