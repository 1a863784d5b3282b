"""A stand-in for TF Serving in tests: a real gRPC PredictionService on
127.0.0.1 that runs an exported SavedModel.

tensorflow_model_server cannot be installed here (it is on neither PyPI nor
Debian), so t2t-query is tested against this instead. Like TF Serving it
loads the highest integer version under the model base path through the
TF1 SavedModel loader (a Session, the signature's tensor names) and answers
Predict with the request's model_spec; an unknown model name gets
NOT_FOUND and an unknown signature FAILED_PRECONDITION, as from TF Serving.
It is not TF Serving: no batching, no version polling, no REST API.

For the client's tests it keeps the model_spec of every request it gets
(`requests`), and answers the servable names in `fail_for` with the status
a test chose (so that a test of how t2t-query passes on a server's error
asserts the test's own status, not one this stand-in made up).
"""
import collections
from concurrent import futures
import os

import grpc
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the sentencepiece ops)
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_service_pb2_grpc

from t2tlite.export.layout import numbered_versions

# A request's model_spec as received: version None when not set.
ModelSpec = collections.namedtuple("ModelSpec", "name signature_name version")
StandIn = collections.namedtuple("StandIn", "server address servicer")


class _Servicer(prediction_service_pb2_grpc.PredictionServiceServicer):

  def __init__(self, name, base_path):
    self.name = name
    # The highest version, read as t2t-exporter numbers them.
    self.version, folder = numbered_versions(os.listdir(base_path))[-1]
    self.graph = tf.Graph()
    self.session = tf.compat.v1.Session(graph=self.graph)
    with self.graph.as_default():
      meta_graph = tf.compat.v1.saved_model.loader.load(
          self.session, ["serve"], os.path.join(base_path, folder))
    self.signatures = meta_graph.signature_def
    self.requests = []  # ModelSpec of each Predict, in order
    self.fail_for = {}  # servable name -> (grpc.StatusCode, details)

  def Predict(self, request, context):  # noqa: N802  (gRPC method name)
    spec = request.model_spec
    self.requests.append(ModelSpec(
        spec.name, spec.signature_name,
        spec.version.value if spec.HasField("version") else None))
    if spec.name in self.fail_for:
      context.abort(*self.fail_for[spec.name])
    if request.model_spec.name != self.name:
      context.abort(grpc.StatusCode.NOT_FOUND,
                    f"Servable not found for request: Latest("
                    f"{request.model_spec.name})")
    name = request.model_spec.signature_name or "serving_default"
    if name not in self.signatures:
      context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                    f"Serving signature key \"{name}\" not found.")
    signature = self.signatures[name]
    try:
      feeds = {signature.inputs[key].name: tf.make_ndarray(tensor)
               for key, tensor in request.inputs.items()}
      fetches = {key: info.name for key, info in signature.outputs.items()}
      values = self.session.run(fetches, feeds)
    except (KeyError, ValueError, tf.errors.OpError) as error:
      context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
    response = predict_pb2.PredictResponse()
    response.model_spec.name = self.name
    response.model_spec.version.value = self.version
    response.model_spec.signature_name = name
    for key, value in values.items():
      response.outputs[key].CopyFrom(tf.make_tensor_proto(value))
    return response


def start(name, base_path):
  """Starts a server on a free 127.0.0.1 port; returns a StandIn (the grpc
  server, "HOST:PORT", the servicer with its `requests` and `fail_for`).
  Call .server.stop(None) to end it."""
  server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
  servicer = _Servicer(name, base_path)
  prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
      servicer, server)
  port = server.add_insecure_port("127.0.0.1:0")
  server.start()
  return StandIn(server, f"127.0.0.1:{port}", servicer)
