"""Device memory copy bandwidth: ``dst.copy_(src)`` of one buffer.

Metric ``GBps`` = 2 x bytes / t / 1e9: the copy reads the buffer once and writes it once, the
convention of the measurement format (bytes read plus bytes written).
"""

from __future__ import annotations

import torch

from perfmodel.bench import Context, measure, method_note

MiB = 2**20
GPU_SIZES = [MiB * 4**i for i in range(7)]  # 1 MiB .. 4 GiB
GPU_QUICK_SIZES = [16 * MiB, 256 * MiB]
CPU_SIZES = [MiB, 16 * MiB]
CPU_QUICK_SIZES = [MiB]


def memcpy(ctx: Context, size: int) -> dict:
    """Measure one copy of ``size`` bytes and record a ``GBps`` row."""
    if size <= 0:
        raise ValueError(f"bytes must be positive, got {size}")
    src = torch.empty(size, dtype=torch.uint8, device=ctx.device).random_(0, 256)
    dst = torch.empty_like(src)
    seconds = measure(ctx, lambda: dst.copy_(src))
    return ctx.row(id=f"bench-memcpy-{size}", kind="memcpy", num_gpus=1, bytes=size,
                   metric="GBps", value=2 * size / seconds / 1e9,
                   notes=f"Tensor.copy_ device to device; {method_note(ctx)}; "
                         f"GBps = 2 x bytes (read + write) / median time")


def run(ctx: Context, quick: bool = False) -> None:
    sizes = ctx.choose(quick, GPU_SIZES, GPU_QUICK_SIZES, CPU_SIZES, CPU_QUICK_SIZES)
    for size in sizes:
        memcpy(ctx, size)
