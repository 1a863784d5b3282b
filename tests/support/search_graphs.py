"""What a traced search graph holds."""


def weight_transposes(graph):
  """Transposes of 2-D tensors in `graph`: the decoding layouts of kernels
  (`linear.decoding_kernels`), when the search makes its weights."""
  return [op for op in graph.get_operations()
          if op.type == "Transpose" and op.inputs[0].shape.rank == 2]
