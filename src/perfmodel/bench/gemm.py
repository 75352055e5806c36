"""GEMM sweep: ``C = A @ B`` with A (m x k), B (k x n) through ``torch.matmul`` (cuBLAS on GPUs).

Metric ``tflops`` = 2 m n k / t / 1e12 (one multiply and one add per inner-product term, the
convention of cuBLAS benchmarks and of the measurement rows in data/measurements/).  ``tf32`` runs
fp32 tensors with ``torch.backends.cuda.matmul.allow_tf32`` on, ``fp32`` with it off.
"""

from __future__ import annotations

import torch

from perfmodel.bench import DTYPES, Context, measure, method_note

GPU_SHAPES = [(s, s, s) for s in (1024, 2048, 4096, 8192, 16384)] + [
    (8192, 8192 * 3, 8192), (16384, 4096, 16384), (2048, 2048, 13312)]
GPU_QUICK_SHAPES = [(1024, 1024, 1024), (4096, 4096, 4096)]
CPU_SHAPES = [(128, 128, 128), (256, 256, 256)]
CPU_QUICK_SHAPES = [(32, 48, 64)]


def gemm(ctx: Context, m: int, n: int, k: int, dtype: str) -> dict:
    """Measure one GEMM and record a ``tflops`` row."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} not supported by the harness; allowed: {', '.join(DTYPES)}")
    torch_dtype = DTYPES[dtype]
    a = torch.randn(m, k, device=ctx.device, dtype=torch_dtype)
    b = torch.randn(k, n, device=ctx.device, dtype=torch_dtype)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        seconds = measure(ctx, lambda: torch.matmul(a, b))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return ctx.row(id=f"bench-gemm-{m}x{n}x{k}-{dtype}", kind="gemm", num_gpus=1, m=m, n=n, k=k,
                   dtype=dtype, metric="tflops", value=2 * m * n * k / seconds / 1e12,
                   notes=f"torch.matmul on random normal inputs; {method_note(ctx)}; "
                         f"tflops = 2mnk / median time")


def run(ctx: Context, quick: bool = False) -> None:
    if ctx.device.type == "cuda":
        shapes, dtypes = (GPU_QUICK_SHAPES, ["bf16", "tf32"]) if quick else (
            GPU_SHAPES, ["bf16", "fp16", "tf32", "fp32"])
    else:
        shapes, dtypes = (CPU_QUICK_SHAPES if quick else CPU_SHAPES), ["fp32"]
    for m, n, k in shapes:
        for dtype in dtypes:
            gemm(ctx, m, n, k, dtype)
