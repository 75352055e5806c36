"""Measurement harness (optional, needs PyTorch): measure a machine and write measurement rows.

``python -m perfmodel.bench --out FILE.csv [--quick]`` runs four benchmarks and writes their rows
in the measurement CSV format (``perfmodel validate``, ``calibrate`` and ``baseline`` read it):

* ``gemm``      -- ``torch.matmul`` over an (m, n, k, dtype) sweep, metric ``tflops`` = 2mnk / t;
* ``memcpy``    -- device-to-device ``Tensor.copy_``, metric ``GBps`` counting bytes read plus
  bytes written (2 x buffer);
* ``allreduce`` -- ``torch.distributed.all_reduce`` (NCCL on GPUs, gloo on CPU; one process
  unless launched by ``torchrun``), metric ``time_us``;
* ``layer``     -- forward + backward of one GPT-style transformer layer, metric ``step_time_s``.

Timing: CUDA events around each call on a GPU (``time.perf_counter`` on CPU), warm-up calls
first, the **median** of the timed calls reported.  Every row carries its provenance in
``source`` (device name, torch/CUDA/driver versions, date; never the host name) and its method in
``notes``.  Nothing else in perfmodel imports this package.
"""

from __future__ import annotations

import datetime as _datetime
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

try:
    import torch
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("perfmodel.bench needs PyTorch: pip install 'perfmodel[bench]'") from error

__all__ = ["Context", "make_context", "measure", "run", "DTYPES"]

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
          "bf16": torch.bfloat16}


@dataclass
class Context:
    """Where and how to measure: torch device, the ``gpu`` column, provenance, repetitions."""

    device: torch.device
    gpu: str
    source: str
    warmup: int
    repeats: int
    rank: int = 0  # torch.distributed rank; only rank 0 writes the file
    rows: list[dict] = field(default_factory=list)

    def row(self, **columns) -> dict:
        """Append one measurement row (``id`` made unique by a running number)."""
        row = {"id": f"{columns.pop('id')}-{len(self.rows) + 1:04d}", "gpu": self.gpu,
               "source": self.source, **columns}
        self.rows.append(row)
        return row

    def choose(self, quick: bool, gpu_full, gpu_quick, cpu_full, cpu_quick):
        """The sweep for this device: GPU or CPU sizes, full or quick."""
        if self.device.type == "cuda":
            return gpu_quick if quick else gpu_full
        return cpu_quick if quick else cpu_full

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def _driver_version() -> str:
    """NVIDIA kernel driver version from /proc (Linux), else 'unknown'."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return "unknown"
    for word in text.split():
        if word.count(".") >= 1 and word.replace(".", "").isdigit():
            return word
    return "unknown"


def _catalog_name(device_name: str) -> str:
    """The catalog's canonical name for a torch device name when the catalog knows it."""
    try:
        from perfmodel.hardware.catalog import load_catalog

        return load_catalog().gpu(device_name).name
    except Exception:  # catalog missing or name unknown: keep what torch says
        return device_name


def make_context(device: str | None = None, gpu: str | None = None, quick: bool = False) -> Context:
    """A measurement context on ``device`` (default: the CUDA device of ``$LOCAL_RANK``, else
    the first, else the CPU).

    ``gpu`` overrides the ``gpu`` column (default: the catalog name of the device if the catalog
    knows it, else torch's device name; ``cpu`` on the CPU).
    """
    if device is None:  # under torchrun each process takes the GPU of its local rank
        device = f"cuda:{os.environ.get('LOCAL_RANK', 0)}" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    from perfmodel import __version__

    date = _datetime.date.today().isoformat()
    if dev.type == "cuda":
        name = torch.cuda.get_device_name(dev)
        software = (f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
                    f"cuDNN {torch.backends.cudnn.version()}, driver {_driver_version()}")
        warmup, repeats = (5, 20) if quick else (10, 50)
    else:
        name = "cpu"
        software = f"torch {torch.__version__} (CPU, {torch.get_num_threads()} threads)"
        warmup, repeats = (1, 3) if quick else (2, 5)
    source = f"perfmodel.bench {__version__} on {name}; {software}; {date}"
    return Context(dev, gpu or (_catalog_name(name) if dev.type == "cuda" else "cpu"),
                   source, warmup, repeats)


def measure(ctx: Context, function) -> float:
    """Median wall time in seconds of ``function()`` over ``ctx.repeats`` calls after
    ``ctx.warmup`` untimed ones (CUDA events on a GPU, perf_counter on CPU)."""
    for _ in range(ctx.warmup):
        function()
    ctx.synchronize()
    times = []
    if ctx.device.type == "cuda":
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(ctx.repeats)]
        for start, end in pairs:
            start.record()
            function()
            end.record()
        torch.cuda.synchronize(ctx.device)
        times = [start.elapsed_time(end) / 1e3 for start, end in pairs]
    else:
        for _ in range(ctx.repeats):
            begin = time.perf_counter()
            function()
            times.append(time.perf_counter() - begin)
    return statistics.median(times)


def method_note(ctx: Context) -> str:
    clock = "CUDA events" if ctx.device.type == "cuda" else "time.perf_counter"
    return f"median of {ctx.repeats} calls timed with {clock} after {ctx.warmup} warm-up calls"
