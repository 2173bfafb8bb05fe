"""Float comparisons that hold on any x86 CPU: BLAS kernels differ between machines (SIMD width,
blocking, thread count), so the same float32 products are summed in other orders."""

import torch


def assert_close_float32(actual: torch.Tensor, expected: torch.Tensor, msg: str = "") -> None:
    """Equal up to float32 reordering. A float32 sum of n terms may be off by about n * 6e-8 of the sum
    of their sizes, so the error scales with the tensor's largest element, not with each element (an
    element near 0 can be the difference of large terms): 1e-5 of the largest element (at least of 1,
    for tensors of small values) plus 1e-4 of each element. Measured with ATEN_CPU_CAPABILITY=default
    and avx2 on the comparisons that use it: at most 3e-7 of the largest element, a 30x margin, while
    any real mistake (a wrong mask, position or cache row) moves values by far more."""
    scale = max(float(expected.abs().max()), 1.0) if expected.numel() else 1.0
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5 * scale, msg=msg or None)
