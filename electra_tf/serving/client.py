"""Clients for a running TF Serving: the REST API and the gRPC `PredictionService`.

Both expose the same three calls, so the `predict` command (and user code)
can switch transports with a URL scheme:

    status()    model version states     REST  GET  /v1/models/<name>[/versions/<v>]
                                         gRPC  ModelService.GetModelStatus
    metadata()  the signature definitions REST GET  .../metadata
                                         gRPC  PredictionService.GetModelMetadata
    predict()   run a signature           REST  POST .../<name>[/versions/<v>]:predict
                                         gRPC  PredictionService.Predict

`predict` takes and returns columns: `{input name: values for the batch}` ->
`{output name: np.ndarray}`. REST requests use the columnar `inputs` format
(one request per batch, every input a list); strings that are not valid
UTF-8 are sent as `{"b64": ...}`, as TF Serving's JSON mapping requires.
A server-side failure raises `ServingError` carrying the server's message.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Optional, Union

import numpy as np

DEFAULT_SIGNATURE = "serving_default"


class ServingError(RuntimeError):
    """The server rejected a request or could not be reached; the message says which."""


def _json_value(value):
    """A Python/NumPy value as TF Serving's JSON: bytes that are not UTF-8 go as b64."""
    if isinstance(value, np.ndarray):
        return [_json_value(v) for v in value.tolist()] if value.ndim else _json_value(value.item())
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, np.generic):
        return value.item()
    return value


class RestClient:
    """TF Serving's REST API (default port 8501).

    Args:
        url: `http://host:port`.
        model_name: the served model's name.
        version: a version number; None lets the server pick (the latest).
        timeout: seconds per HTTP request.
    """

    def __init__(
        self, url: str, model_name: str, version: Optional[int] = None, timeout: float = 30.0
    ):
        self.url = url.rstrip("/")
        self.model_name = model_name
        self.version = version
        self.timeout = timeout

    def _model_url(self) -> str:
        path = f"{self.url}/v1/models/{self.model_name}"
        return path + (f"/versions/{self.version}" if self.version is not None else "")

    def _request(self, url: str, body: Optional[dict] = None) -> dict:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(
            url,
            data=data,
            method="GET" if data is None else "POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as error:
            text = error.read().decode("utf-8", "replace")
            try:
                text = json.loads(text).get("error", text)
            except ValueError:
                pass
            raise ServingError(f"{url}: HTTP {error.code}: {text}") from None
        except urllib.error.URLError as error:
            raise ServingError(f"{url}: cannot connect ({error.reason})") from None

    def status(self) -> dict:
        """`{"model_version_status": [{"version", "state", "status"}, ...]}`."""
        return self._request(self._model_url())

    def metadata(self) -> dict:
        """`{"model_spec": ..., "metadata": {"signature_def": ...}}`."""
        return self._request(self._model_url() + "/metadata")

    def predict(self, inputs: dict, signature_name: str = DEFAULT_SIGNATURE) -> dict:
        """Runs a signature on one batch (columnar request).

        Args:
            inputs: `{input name: list or array of B values}`.
            signature_name: the signature to run.

        Returns:
            `{output name: np.ndarray}` with the batch first.
        """
        body = {
            "signature_name": signature_name,
            "inputs": {k: _json_value(v) for k, v in inputs.items()},
        }
        response = self._request(self._model_url() + ":predict", body)
        outputs = response["outputs"]
        if not isinstance(outputs, dict):  # a signature with a single output drops its name
            outputs = {"output": outputs}
        return {k: np.asarray(v) for k, v in outputs.items()}

    def predict_instances(self, instances: list, signature_name: str = DEFAULT_SIGNATURE) -> list:
        """Row format: `instances` in, the server's `predictions` list out (unconverted)."""
        body = {"signature_name": signature_name, "instances": _json_value(instances)}
        return self._request(self._model_url() + ":predict", body)["predictions"]


def _text_array(values) -> Optional[np.ndarray]:
    """A batch of texts (str or bytes, mixed) as an object array of UTF-8 bytes; None if not text.

    `np.asarray` cannot be used directly: it would decode bytes in a list
    that also holds str, failing on bytes that are not UTF-8.
    """
    if isinstance(values, np.ndarray):
        if values.dtype.kind not in ("U", "S", "O"):
            return None
        values = values.tolist()
    values = list(values)
    if not values or not all(isinstance(v, (str, bytes, np.bytes_)) for v in values):
        return None
    return np.array(
        [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in values], dtype=object
    )


def _tensor_proto(values):
    import tensorflow as tf

    text = _text_array(values)
    if text is not None:
        return tf.make_tensor_proto(text, dtype=tf.string)
    array = values if isinstance(values, np.ndarray) else np.asarray(values)
    if array.dtype.kind in ("i", "u"):
        array = array.astype(np.int32)  # the token-id signatures take int32
    elif array.dtype.kind == "f":
        array = array.astype(np.float32)
    return tf.make_tensor_proto(array)


class GrpcClient:
    """TF Serving's gRPC API (default port 8500), through tensorflow-serving-api.

    Args:
        target: `host:port`.
        model_name, version, timeout: as for `RestClient`.
    """

    def __init__(
        self, target: str, model_name: str, version: Optional[int] = None, timeout: float = 30.0
    ):
        import grpc
        from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

        self.target = target
        self.model_name = model_name
        self.version = version
        self.timeout = timeout
        self._channel = grpc.insecure_channel(
            target,
            options=[
                ("grpc.max_receive_message_length", 256 << 20),
                ("grpc.max_send_message_length", 256 << 20),
            ],
        )
        self._predictions = prediction_service_pb2_grpc.PredictionServiceStub(self._channel)
        self._models = model_service_pb2_grpc.ModelServiceStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def _spec(self, message, signature_name: Optional[str] = None):
        message.model_spec.name = self.model_name
        if self.version is not None:
            message.model_spec.version.value = int(self.version)
        if signature_name is not None:
            message.model_spec.signature_name = signature_name
        return message

    def _call(self, method, request):
        import grpc

        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as error:
            raise ServingError(f"{self.target}: {error.code().name}: {error.details()}") from None

    def status(self) -> dict:
        """`{"model_version_status": [...]}` as in the REST API."""
        from google.protobuf import json_format
        from tensorflow_serving.apis import get_model_status_pb2

        response = self._call(
            self._models.GetModelStatus, self._spec(get_model_status_pb2.GetModelStatusRequest())
        )
        return json_format.MessageToDict(response, preserving_proto_field_name=True)

    def metadata(self) -> dict:
        """`{"model_spec": ..., "metadata": {"signature_def": ...}}` as in the REST API."""
        from google.protobuf import json_format
        from tensorflow.core.protobuf import meta_graph_pb2
        from tensorflow_serving.apis import get_model_metadata_pb2

        request = self._spec(get_model_metadata_pb2.GetModelMetadataRequest())
        request.metadata_field.append("signature_def")
        response = self._call(self._predictions.GetModelMetadata, request)
        signatures = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signatures)
        del meta_graph_pb2  # SignatureDef's message type must be registered before unpacking
        return {
            "model_spec": json_format.MessageToDict(
                response.model_spec, preserving_proto_field_name=True
            ),
            "metadata": {
                "signature_def": json_format.MessageToDict(
                    signatures, preserving_proto_field_name=True
                )
            },
        }

    def predict(self, inputs: dict, signature_name: str = DEFAULT_SIGNATURE) -> dict:
        """Runs a signature on one batch; same contract as `RestClient.predict`."""
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2

        request = self._spec(predict_pb2.PredictRequest(), signature_name)
        for name, values in inputs.items():
            request.inputs[name].CopyFrom(_tensor_proto(values))
        response = self._call(self._predictions.Predict, request)
        return {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}


class LocalPredictor:
    """Runs an exported version directory in this process: batch prediction without a server.

    Only TensorFlow and TensorFlow Text are needed to load the SavedModel.

    Args:
        version_dir: `<export_base>/<model_name>/<version>`.
    """

    def __init__(self, version_dir: str):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

        self.version_dir = version_dir
        self._loaded = tf.saved_model.load(version_dir, tags=["serve"])

    def status(self) -> dict:
        return {"model_version_status": [{"version": self.version_dir, "state": "AVAILABLE"}]}

    def metadata(self) -> dict:
        signatures = {}
        for name, function in self._loaded.signatures.items():
            signatures[name] = {
                "inputs": {
                    k: {"dtype": v.dtype.name, "shape": v.shape.as_list()}
                    for k, v in function.structured_input_signature[1].items()
                },
                "outputs": {
                    k: {"dtype": v.dtype.name, "shape": v.shape.as_list()}
                    for k, v in function.structured_outputs.items()
                },
            }
        return {"metadata": {"signature_def": signatures}}

    def predict(self, inputs: dict, signature_name: str = DEFAULT_SIGNATURE) -> dict:
        import tensorflow as tf

        if signature_name not in self._loaded.signatures:
            raise ServingError(
                f"{self.version_dir}: no signature {signature_name!r} (has "
                f"{', '.join(sorted(self._loaded.signatures))})."
            )
        function = self._loaded.signatures[signature_name]
        tensors = {}
        for name, values in inputs.items():
            text = _text_array(values)
            if text is not None:
                tensors[name] = tf.constant(text, tf.string)
            else:
                tensors[name] = tf.constant(np.asarray(values).astype(np.int32))
        try:
            outputs = function(**tensors)
        except (tf.errors.InvalidArgumentError, TypeError, ValueError) as error:
            raise ServingError(f"{self.version_dir}: {str(error).splitlines()[0][:500]}") from None
        return {k: v.numpy() for k, v in outputs.items()}


def connect(
    server: str,
    model_name: Optional[str] = None,
    version: Optional[int] = None,
    timeout: float = 30.0,
) -> Union[RestClient, GrpcClient, LocalPredictor]:
    """A client from an address.

    Args:
        server: `http://host:port` (REST), `grpc://host:port` (gRPC), or a
            version directory (local, no server).
        model_name: needed for a server.
        version, timeout: see `RestClient`.

    Raises:
        ValueError: unknown scheme or a missing model name.
    """
    if server.startswith(("http://", "https://", "grpc://")):
        if not model_name:
            raise ValueError(f"--server={server}: --model_name is required for a server.")
        if server.startswith("grpc://"):
            return GrpcClient(server[len("grpc://") :], model_name, version, timeout)
        return RestClient(server, model_name, version, timeout)
    raise ValueError(f"--server={server!r}: use http://host:port (REST) or grpc://host:port.")
