"""All-reduce time through ``torch.distributed``: NCCL on GPUs, gloo on CPU.

Run under ``torchrun --nproc-per-node N python -m perfmodel.bench ...`` for N GPUs; without it the
benchmark starts a one-process group (a latency floor, not a network measurement).  Metric
``time_us``: median time of one ``all_reduce`` (sum) of an fp32 buffer of ``message_bytes``
bytes, as nccl-tests' ``time`` column; ``algorithm`` is ``auto`` unless ``NCCL_ALGO`` forced one.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from perfmodel.bench import Context, measure, method_note

KiB, MiB = 2**10, 2**20
GPU_SIZES = [KiB * 4**i for i in range(11)]  # 1 KiB .. 1 GiB
GPU_QUICK_SIZES = [MiB, 64 * MiB]
CPU_SIZES = [4 * KiB, MiB]
CPU_QUICK_SIZES = [4 * KiB]


def _start_group(ctx: Context) -> bool:
    """Join (or start) a process group; True when this call started it and must end it."""
    if dist.is_initialized():
        return False
    backend = "nccl" if ctx.device.type == "cuda" else "gloo"
    if "WORLD_SIZE" in os.environ:  # launched by torchrun
        dist.init_process_group(backend, init_method="env://")
    else:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    return True


def allreduce(ctx: Context, size: int) -> dict | None:
    """Measure one all-reduce of ``size`` bytes; rank 0 records a ``time_us`` row."""
    if size < 4 or size % 4:
        raise ValueError(f"message_bytes must be a positive multiple of 4 (fp32), got {size}")
    buffer = torch.ones(size // 4, dtype=torch.float32, device=ctx.device)
    dist.barrier()
    seconds = measure(ctx, lambda: dist.all_reduce(buffer))
    if ctx.rank != 0:
        return None
    world = dist.get_world_size()
    backend = dist.get_backend()
    version = backend
    if backend == "nccl":
        nccl = torch.cuda.nccl.version()  # a tuple in torch 2.x, an int before
        version = f"NCCL {'.'.join(map(str, nccl)) if isinstance(nccl, tuple) else nccl}"
    algorithm = os.environ.get("NCCL_ALGO", "auto").lower()
    return ctx.row(id=f"bench-allreduce-{world}x-{size}", kind="collective", num_gpus=world,
                   gpus_per_node=int(os.environ.get("LOCAL_WORLD_SIZE", world)),
                   collective="all_reduce", algorithm=algorithm, message_bytes=size,
                   metric="time_us", value=seconds * 1e6,
                   notes=f"torch.distributed.all_reduce (sum, fp32) over {version}, "
                         f"{world} process(es); {method_note(ctx)}")


def run(ctx: Context, quick: bool = False) -> None:
    started = _start_group(ctx)
    ctx.rank = dist.get_rank()
    try:
        sizes = ctx.choose(quick, GPU_SIZES, GPU_QUICK_SIZES, CPU_SIZES, CPU_QUICK_SIZES)
        for size in sizes:
            allreduce(ctx, size)
    finally:
        if started:
            dist.destroy_process_group()
