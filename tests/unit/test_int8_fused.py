"""int8 maps that read the same input in one product (`int8.concatenated`):
the same columns as the separate products, bit for bit."""
import numpy as np
import pytest
import tensorflow as tf

from t2tlite.layers import int8

from int8_kernel import needs_int8


@needs_int8
@pytest.mark.parametrize("weights_first", [False, True])
def test_one_product_gives_the_columns_of_three(weights_first):
  rng = np.random.RandomState(3)
  x = tf.constant(rng.standard_normal([9, 32]).astype(np.float32))
  kernels = [int8.quantize_kernel(
      tf.constant(rng.standard_normal([32, d]).astype(np.float32)),
      weights_first) for d in (16, 16, 24)]
  fused = int8.matmul(x, int8.concatenated(kernels)).numpy()
  separate = np.concatenate([int8.matmul(x, k).numpy() for k in kernels],
                            axis=1)
  np.testing.assert_array_equal(fused, separate)


def test_the_concatenated_kernel_keeps_each_columns_scale():
  kernels = [int8.quantize_kernel(tf.constant([[1.0, -2.0], [0.5, 4.0]])),
             int8.quantize_kernel(tf.constant([[3.0], [-6.0]]))]
  fused = int8.concatenated(kernels)
  assert fused.kernel.shape == (2, 3)
  np.testing.assert_array_equal(fused.scales.numpy(), [1.0, 4.0, 6.0])
  np.testing.assert_array_equal(
      fused.column_sums.numpy(),
      np.concatenate([k.column_sums.numpy() for k in kernels]))
