"""Test scaffolding: localhost stand-ins that speak TF Serving's REST and gRPC protocols.

They load a version directory with `tf.saved_model.load` and answer the
calls the clients make (predict, model status, metadata) in TF Serving's
wire formats, so the clients are tested over real sockets. Not a server to
deploy.
"""

import base64
import json
import re
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401


class ServedModel:
    """One model name with one version, as the server would hold it."""

    def __init__(self, name, version, version_dir):
        from tensorflow.core.protobuf import saved_model_pb2

        self.name, self.version = name, int(version)
        self.loaded = tf.saved_model.load(version_dir)
        saved = saved_model_pb2.SavedModel()
        with open(f"{version_dir}/saved_model.pb", "rb") as f:
            saved.ParseFromString(f.read())
        self.signature_defs = {
            k: v for k, v in saved.meta_graphs[0].signature_def.items() if not k.startswith("__")
        }

    def run(self, signature_name, inputs):
        """`{name: np.ndarray}` -> `{name: np.ndarray}`; ValueError for a bad request."""
        if signature_name not in self.signature_defs:
            raise ValueError(
                f'Serving signature name: "{signature_name}" not found in signature def'
            )
        expected = set(self.signature_defs[signature_name].inputs)
        if set(inputs) != expected:
            raise ValueError(f"input names {sorted(inputs)} do not match {sorted(expected)}")
        function = self.loaded.signatures[signature_name]
        specs = function.structured_input_signature[1]
        tensors = {}
        for name, value in inputs.items():
            try:
                tensors[name] = tf.constant(value, dtype=specs[name].dtype)
            except (TypeError, ValueError) as error:
                raise ValueError(f"input {name}: {error}") from None
        try:
            return {k: v.numpy() for k, v in function(**tensors).items()}
        except tf.errors.InvalidArgumentError as error:
            raise ValueError(error.message or str(error)) from None

    def status(self):
        return {
            "model_version_status": [
                {
                    "version": str(self.version),
                    "state": "AVAILABLE",
                    "status": {"error_code": "OK", "error_message": ""},
                }
            ]
        }

    def signature_def_map(self):
        from tensorflow_serving.apis import get_model_metadata_pb2

        mapping = get_model_metadata_pb2.SignatureDefMap()
        for name, signature in self.signature_defs.items():
            mapping.signature_def[name].CopyFrom(signature)
        return mapping


def _from_json(value):
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    if isinstance(value, str):
        return value.encode("utf-8")
    return value


def _to_json(array):
    array = np.asarray(array)
    if array.dtype.kind in ("O", "S"):
        return (
            np.vectorize(lambda b: b.decode("utf-8", "replace"), otypes=[object])(array).tolist()
            if array.size
            else array.tolist()
        )
    return array.tolist()


class RestStandIn:
    """`/v1/models/<name>[/versions/<v>][/metadata|:predict]` on 127.0.0.1."""

    PATH = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+))?(/metadata|:predict)?$")

    def __init__(self, model: ServedModel):
        self.model = model
        self.requests = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, code, body):
                data = json.dumps(body).encode("utf-8")
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method):
                match = stand_in.PATH.match(self.path)
                if not match:
                    self._reply(404, {"error": f"Malformed request: {method} {self.path}"})
                    return False, None
                name, version, action = match.groups()
                if name != stand_in.model.name or (
                    version and int(version) != stand_in.model.version
                ):
                    self._reply(404, {"error": f"Servable not found for request: Latest({name})"})
                    return False, None
                return True, action

            def do_GET(self):
                found, action = self._route("GET")
                if not found:
                    return None
                if action is None:
                    return self._reply(200, stand_in.model.status())
                if action == "/metadata":
                    from google.protobuf import json_format

                    mapping = json_format.MessageToDict(
                        stand_in.model.signature_def_map(), preserving_proto_field_name=True
                    )
                    return self._reply(
                        200,
                        {
                            "model_spec": {
                                "name": stand_in.model.name,
                                "signature_name": "",
                                "version": str(stand_in.model.version),
                            },
                            "metadata": {"signature_def": mapping},
                        },
                    )
                if action == ":predict":
                    self._reply(400, {"error": "predict needs POST"})

            def do_POST(self):
                found, action = self._route("POST")
                if not found:
                    return None
                if action != ":predict":
                    return self._reply(404, {"error": f"Malformed request: POST {self.path}"})
                try:
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    stand_in.requests.append(body)
                    return self._reply(200, stand_in.predict(body))
                except ValueError as error:
                    return self._reply(400, {"error": str(error)})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def predict(self, body):
        signature = body.get("signature_name", "serving_default")
        if ("instances" in body) == ("inputs" in body):
            raise ValueError("JSON Value must contain exactly one of 'instances' or 'inputs'")
        names = (
            list(self.model.signature_defs.get(signature, {"inputs": {}}).inputs)
            if signature in self.model.signature_defs
            else []
        )
        if "instances" in body:
            instances = body["instances"]
            if instances and isinstance(instances[0], dict):
                inputs = {k: [_from_json(i[k]) for i in instances] for k in instances[0]}
            else:
                inputs = {names[0] if names else "": _from_json(instances)}
            outputs = self.model.run(signature, inputs)
            rows = [{k: _to_json(v[i]) for k, v in outputs.items()} for i in range(len(instances))]
            return {
                "predictions": rows if len(outputs) > 1 else [next(iter(r.values())) for r in rows]
            }
        inputs = body["inputs"]
        if not isinstance(inputs, dict):
            inputs = {names[0] if names else "": inputs}
        outputs = self.model.run(signature, {k: _from_json(v) for k, v in inputs.items()})
        columns = {k: _to_json(v) for k, v in outputs.items()}
        return {"outputs": columns if len(columns) > 1 else next(iter(columns.values()))}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class GrpcStandIn:
    """`tensorflow.serving.PredictionService` and `ModelService` on 127.0.0.1."""

    def __init__(self, model: ServedModel):
        import grpc
        from tensorflow_serving.apis import (
            get_model_metadata_pb2,
            get_model_status_pb2,
            model_service_pb2_grpc,
            predict_pb2,
            prediction_service_pb2_grpc,
        )

        self.model = model

        def check_spec(spec, context):
            if spec.name != model.name or (
                spec.HasField("version") and spec.version.value != model.version
            ):
                context.abort(
                    grpc.StatusCode.NOT_FOUND,
                    f"Servable not found for request: Latest({spec.name})",
                )

        class Predictions(prediction_service_pb2_grpc.PredictionServiceServicer):
            def Predict(self, request, context):
                check_spec(request.model_spec, context)
                inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
                try:
                    outputs = model.run(
                        request.model_spec.signature_name or "serving_default", inputs
                    )
                except ValueError as error:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
                response = predict_pb2.PredictResponse()
                response.model_spec.name = model.name
                response.model_spec.version.value = model.version
                for name, value in outputs.items():
                    response.outputs[name].CopyFrom(tf.make_tensor_proto(value))
                return response

            def GetModelMetadata(self, request, context):
                check_spec(request.model_spec, context)
                if list(request.metadata_field) != ["signature_def"]:
                    context.abort(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        "Metadata field signature_def is the only one supported",
                    )
                response = get_model_metadata_pb2.GetModelMetadataResponse()
                response.model_spec.name = model.name
                response.model_spec.version.value = model.version
                response.metadata["signature_def"].Pack(model.signature_def_map())
                return response

        class Models(model_service_pb2_grpc.ModelServiceServicer):
            def GetModelStatus(self, request, context):
                check_spec(request.model_spec, context)
                response = get_model_status_pb2.GetModelStatusResponse()
                status = response.model_version_status.add()
                status.version = model.version
                status.state = get_model_status_pb2.ModelVersionStatus.AVAILABLE
                return response

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
            Predictions(), self.server
        )
        model_service_pb2_grpc.add_ModelServiceServicer_to_server(Models(), self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.target = f"127.0.0.1:{port}"

    def __enter__(self):
        self.server.start()
        return self

    def __exit__(self, *exc):
        self.server.stop(grace=None)
