"""Every efficiency parameter of the cost models, declared once.

A :class:`Parameter` is one knob (an eta, a latency, an overlap fraction, a per-step overhead)
with its default (the prior's centre), its bounds, its unit, the physics it may vary with
(``per="architecture"``, ``per="link_kind"`` or ``per="framework"``) and where the default comes from.  The table
:data:`PARAMETERS` is static: importing this module declares all of them, so a calibration profile
can be checked and fitted in a fresh process whatever else was imported.  Model modules register
nothing; they read values from a :class:`~perfmodel.profile.CalibrationProfile`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Parameter", "PARAMETERS"]


@dataclass(frozen=True)
class Parameter:
    """One efficiency parameter: default (the prior's centre), bounds, unit and provenance."""

    name: str
    default: float
    low: float
    high: float
    unit: str
    description: str
    source: str
    per: str | None = None  # None | "architecture" | "link_kind" | "framework"
    prior_log_sigma: float = 0.5  # width of the log-normal prior used by calibrate()
    group_defaults: tuple[tuple[str, float], ...] = ()  # ((group, default), ...): sourced in `source`
    poolable: bool = True  # False: a group its rows do not determine keeps the prior, not the groups' median
    # where calibrate() starts the parameter when the profile has no value (None: its default).  A
    # parameter that enters the model through a larger-of (the host's dispatch against the GPU's work)
    # has no gradient where it does not bind, so a fit started below every row's binding point can
    # never find it; started where it binds, rows that do not show it pull it down until it stops
    # binding (and, undetermined, it returns to its prior or pooled centre).  The prior stays `default`.
    fit_start: float | None = None
    # the group that sets the unit of a relative parameter: never fitted, always its default (a scale
    # relative to it would otherwise trade freely with the values it multiplies)
    reference_group: str | None = None
    # True: an architecture with no fitted value that no fitted architecture descends from takes its
    # nearest fitted predecessor generation's (perfmodel.hardware.specs.ARCHITECTURE_PREDECESSORS)
    # instead of the pooled median: a trait a new generation inherits from the design it builds on
    # (CalibrationProfile.applying_key)
    inherits: bool = False

    def __post_init__(self):
        for group, value in (("", self.default), *self.group_defaults):
            if not self.low <= value <= self.high:
                raise ValueError(f"parameter {self.name}{f'[{group}]' if group else ''}: default {value} "
                                 f"outside [{self.low}, {self.high}]")
        if self.inherits and self.per != "architecture":
            raise ValueError(f"parameter {self.name}: only a per-architecture parameter inherits a predecessor's value")
        if self.fit_start is not None and not self.low <= self.fit_start <= self.high:
            raise ValueError(f"parameter {self.name}: fit_start {self.fit_start} outside [{self.low}, {self.high}]")

    @property
    def pools(self) -> bool:
        """Whether a group without rows of its own takes the median of the fitted groups
        (:func:`perfmodel.calibration.fit.pool_groups`): grouped, poolable, no sourced per-group defaults."""
        return self.per is not None and self.poolable and not self.group_defaults

    def default_for(self, group: str | None = None) -> float:
        """The default for ``group`` (its own default when the physics differs by group), else ``default``."""
        return dict(self.group_defaults).get(group, self.default) if group is not None else self.default


_KERNEL_CSV = "stas00/ml-engineering compute/accelerator/README.md @ 744d01e (MAMF table) and " \
              "zzc0721/torch-performance-test-data issue #79"
_NCCL = "NVIDIA/nccl src/graph/tuning.cc (ncclTopoTuneModel, hwLat/baseLat tables)"
_AWS_ADVISOR = ("AWS Spot Instance Advisor (spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json): "
                "'frequency of interruption' = share of capacity reclaimed in the trailing month, in "
                "buckets <5 %, 5-10 %, 10-15 %, 15-20 %, >20 %")
_AWS_GPU_BANDS = ("AWS Spot Instance Advisor figures per GPU family pulled on 2025-05-01 and published in "
                  "'GPU Spot Instance Interruption Rates (May 2025)', thundercompute.com/blog/should-i-use-"
                  "cloud-gpu-spot-instances (updated 2025-05-01): A100 (p4d) 5-10 %, H100 (p5) 10-20 %, "
                  "L4 <5 % per month; the top of each band is used (a month = 730 h)")
_HOURS_PER_MONTH = 730.0  # 8760 h / 12


_TABLE = (
    # --- Compute (kernel model perfmodel.models.gemm; op timing perfmodel.models.compute)
    Parameter(
        name="gemm_cuda_core_efficiency", default=0.85, low=0.3, high=1.0, unit="fraction of clock-scaled peak",
        description="share of the sustained-clock FP32 CUDA-core peak that the inner loop of the largest SGEMM "
                    "tile (256x128) reaches; smaller tiles lose the tile-edge cost, every shape the wave and "
                    "pipeline-fill costs",
        source="prior: cuBLAS SGEMM reaches about 80-90 % of the FP32 peak on large squares (kernel.csv "
               "rows and NVIDIA Matrix Multiplication Background User's Guide, Fig. 'performance vs. "
               "size'); fitted per architecture by calibrate on the NeuSight GEMM rows",
        per="architecture"),
    Parameter(
        name="gemm_linear_efficiency", default=1.0, low=0.2, high=1.5, unit="x the GEMM's rate",
        description="speed of an fp32 nn.Linear call (addmm with a 1-D bias) relative to a plain cuBLAS "
                    "GEMM of its shape on the same GPU: PyTorch routes it to cublasLt with a bias epilogue, "
                    "whose kernel choice differs from cublasSgemm's (torch.bmm)",
        source="PyTorch aten/src/ATen/native/cuda/Blas.cpp (addmm_out_cuda_impl: useLtInterface for a "
               "contiguous 1-D bias and beta = 1; bmm calls cublasSgemmStridedBatched); prior 1 (same "
               "kernels); fitted per architecture by calibrate on the NeuSight nn.Linear and torch.bmm rows "
               "(op column), applied to FP32 matmuls of training steps too",
        per="architecture", prior_log_sigma=0.3),
    Parameter(
        name="gemm_tensor_core_efficiency", default=0.85, low=0.3, high=1.0, unit="fraction of clock-scaled peak",
        description="share of the sustained-clock tensor-core peak that the inner loop of the largest tile "
                    "(256x128) reaches",
        source="stas00/ml-engineering compute/accelerator/README.md @ 744d01e (MAMF table): large bf16 "
               "GEMMs reach 0.87 of the A100 peak (271.2 of 312 TFLOP/s) and 0.80 of the H100 SXM peak; "
               "fitted per architecture by calibrate on kernel.csv",
        per="architecture"),
    Parameter(
        name="gemm_tile_edge_cost", default=8.0, low=0.0, high=128.0, unit="elements",
        description="operand-load cost of a thread-block tile: its inner-loop rate is "
                    "eta (1 + c e_L) / (1 + c (1/tm + 1/tn)), c in elements, e_L = 1/256 + 1/128 (the largest "
                    "tile, whose rate is eta)",
        source="CUTLASS 'Efficient GEMM in CUDA': a tm x tn block loads (tm + tn) elements per k step for "
               "tm tn FMAs; prior 8 (a 128x128 tile then loses 3 % against the largest, a 32x32 one 27 %), fitted by calibrate"),
    Parameter(
        name="gemm_small_tile_sharing", default=0.5, low=0.0, high=1.0, unit="exponent",
        description="how many small thread blocks share one SM: slots = (128^2 / (tm tn))^g, each block at "
                    "1/slots of the SM's rate; 1 = a small block alone uses only its share of the SM",
        source="prior 0.5 between the limits: a 32x32 block has 2-4 warps, too few to hide the FMA and "
               "shared-memory latency of a whole SM (CUDA C++ Best Practices Guide, 'Occupancy'), yet more "
               "than 1/16 of its rate; fitted by calibrate on the GEMM rows"),
    Parameter(
        name="gemm_k_overhead", default=64.0, low=0.0, high=2048.0, unit="elements of k",
        description="fixed per-block cost (operand pipeline fill, epilogue) in elements of k",
        source="CUTLASS 'Efficient GEMM in CUDA' (software pipelining): 2-4 stages of 8-32 deep k-tiles are "
               "loaded before the first FMA; prior 64, fitted by calibrate"),
    Parameter(
        name="gemm_kernel_latency", default=3e-6, low=0.0, high=2e-5, unit="s",
        description="device time of every GEMM kernel besides its tiles' work (the kernel's start on the "
                    "device, prologue, epilogue and completion): the duration of a tiny GEMM kernel",
        source="XLA's H100 matmul table (tensorflow/tensorflow "
               "third_party/xla/xla/service/gpu/model/matmul_interpolator_data.h @ 372d578, sm_90): a "
               "256 x 256 x 256 bf16 GEMM kernel takes 5.2-5.8 us of device time, its tiles' work under 1 us; "
               "ASSUMPTION, prior 3 us (wide: log sigma 1), fitted by "
               "calibrate on the device-time GEMM rows (measurements/kernel_gemm_device.csv)",
        prior_log_sigma=1.0),
    Parameter(
        name="gemm_l2_bandwidth_gain", default=3.0, low=1.0, high=20.0, unit="x DRAM bandwidth",
        description="how much faster the L2-resident share of a GEMM's operands is served than DRAM",
        source="prior 3: A100 L2 read bandwidth about 5 TB/s (NVIDIA A100 Tensor Core GPU Architecture "
               "whitepaper: 2.3x V100's L2 bandwidth) against 1.555 TB/s HBM2; fitted by calibrate"),
    Parameter(
        name="gemm_memory_efficiency", default=0.8, low=0.2, high=1.0, unit="fraction of DRAM bandwidth",
        description="share of the datasheet DRAM bandwidth a memory-bound GEMM reaches",
        source="prior 0.8: device copies reach 0.75-0.82 of the datasheet bandwidth (chsasank/device-benchmarks "
               "README.md @ 7ccc883, the memory_efficiency source); fitted by calibrate on the GEMM rows"),
    Parameter(
        name="gemm_power_activity", default=0.2, low=0.01, high=1.0, unit="fraction of worst-case power",
        description="power a dense GEMM draws as a share of the load the base clock is rated for; sustained "
                    "clock = min(boost, base x a^(-1/3)); a timed call starts nearer boost (gemm_boost_window)",
        source="prior 0.2 so that a 250 W A100 PCIe (765/1410 MHz) holds its boost clock while a 70 W T4 "
               "(585/1590 MHz) is held near 1000 MHz (NVIDIA 'GPU Boost' behaviour: base clock guaranteed "
               "at TDP, boost opportunistic).  Per architecture: the base clock is rated under each "
               "generation's own worst-case load (tensor-core GEMMs from Volta on), so the share an FP32 "
               "GEMM draws differs by generation; with one value for all GPUs the T4 rows held the A100 "
               "below its boost clock and gemm_linear_efficiency[Ampere] rose above 1 to make up for it.  "
               "Fitted per architecture by calibrate; an architecture without GEMM rows keeps the prior "
               "(no pooling: a generation's power draw says nothing about another's)",
        per="architecture", poolable=False),
    Parameter(
        name="gemm_boost_window", default=5e-3, low=1e-4, high=1.0, unit="s",
        description="time constant of the power limiter: a timed kernel starts at its boost clock and falls to "
                    "the sustained clock over about this time (mean clock gain 1 + (g - 1)(1 - e^-x)/x, x = "
                    "kernel / window, g = boost / sustained)",
        source="ASSUMPTION, prior 5 ms: NVIDIA does not publish the power limiter's response time; fitted by "
               "calibrate on the GEMM rows"),
    Parameter(
        name="gemm_floor_overlap", default=2.0, low=1.0, high=16.0, unit="exponent",
        description="overlap of the per-call floor with the kernel: call = (floor^p + kernel^p)^(1/p); "
                    "1 = sum (no overlap), large = max (full overlap)",
        source="prior 2 between the two limits: a synchronised single call (sum) and an asynchronous "
               "benchmark loop, where the host enqueues the next call during the kernel (max); fitted "
               "by calibrate on the GEMM rows"),
    Parameter(
        name="gemm_call_floor", default=3e-5, low=1e-6, high=2e-4, unit="s",
        description="time of one timed framework GEMM call besides the kernel: host dispatch, launch and "
                    "the benchmark's synchronisation (time = floor + kernel)",
        source="sitar-lab/NeuSight training split: the smallest nn.Linear/bmm calls take 34-56 us on every "
               "GPU measured; prior 30 us, fitted by calibrate on the GEMM rows"),
    Parameter(
        name="gemm_linear_call_overhead", default=1e-5, low=0.0, high=1e-4, unit="s",
        description="host time an nn.Linear call adds to gemm_call_floor over a plain matmul/bmm call "
                    "(Module.__call__, F.linear, addmm's bias argument); only timed single calls pay it",
        source="ASSUMPTION, prior 10 us: a few Python-level calls at a few us each; the NeuSight training "
               "split's smallest nn.Linear calls take about 1.6x as long as its smallest torch.bmm calls on "
               "every GPU measured; fitted by calibrate on the GEMM rows"),
    Parameter(
        name="attention_efficiency", default=0.7, low=0.1, high=1.0, unit="fraction of a GEMM's rate",
        description="rate of a fused (flash) attention kernel relative to a cuBLAS GEMM of its shape "
                    "(perfmodel.models.gemm)",
        source="Dao 2023, FlashAttention-2, abstract and Sec. 4.1: 50-73 % of the A100 theoretical "
               "peak (forward and backward), against about 0.87 for large cuBLAS GEMMs (stas00/ml-engineering "
               "MAMF table); 0.7 = 0.6 / 0.87 rounded",
        per="architecture", inherits=True),
    Parameter(
        name="attention_async_kernel_gain", default=1.5, low=1.0, high=3.0, unit="x the attention_efficiency rate",
        description="speed-up of a fused attention kernel written for asynchronous tensor cores (cuDNN fused "
                    "attention as Transformer Engine runs it, FlashAttention-3) over the FlashAttention-2-class "
                    "kernel attention_efficiency describes; applied on vocabulary.ASYNC_TENSOR_CORE_ARCHITECTURES "
                    "(Hopper, Blackwell) for the frameworks of vocabulary.ASYNC_ATTENTION_FRAMEWORKS (NeMo), "
                    "the rate capped at the GEMM's",
        source="Shah et al. 2024, FlashAttention-3 (arXiv:2407.08608), abstract: 1.5-2.0x faster than "
               "FlashAttention-2 on H100 (FP16 up to 740 TFLOP/s, 75 % of peak, against FlashAttention-2's "
               "35 %); prior 1.5, the low end; fitted by calibrate on the training rows"),
    Parameter(
        name="conv_efficiency", default=0.7, low=0.1, high=1.0, unit="fraction of a GEMM's rate",
        description="rate of an implicit-GEMM convolution relative to a cuBLAS GEMM of its shape "
                    "(perfmodel.models.gemm)",
        source="prior, not a measurement: the attention prior (0.7), since cuDNN implicit GEMM pays for "
               "im2col address math and small channel counts (NVIDIA Convolutional Layers User's Guide); "
               "fitted by calibrate on CNN training rows",
        per="architecture", inherits=True),
    Parameter(
        name="conv_winograd_gain", default=1.5, low=1.0, high=4.0, unit="x the implicit-GEMM rate",
        description="speed-up of an FP32 (CUDA-core) 2-D 3x3 stride-1 convolution that cuDNN runs by a "
                    "Winograd algorithm over the implicit GEMM of its 2 m n k FLOP (forward and both "
                    "gradients); 1 = no gain.  Not applied on tensor cores (TF32/FP16/BF16) or to 3-D, "
                    "strided, grouped or transposed convolutions",
        source="prior 1.5 between no gain and F(2x2,3x3)'s 2.25x fewer multiplications (Lavin & Gray 2016, "
               "arXiv:1509.09308, Sec. 4; F(4x4,3x3): 4x, the upper bound), as their transforms cost memory "
               "traffic; cuDNN's WINOGRAD algorithm requires a 3x3 filter and WINOGRAD_NONFUSED serves 3x3 "
               "and 5x5 filters at stride 1 (cuDNN API reference, cudnnConvolutionForward supported "
               "configurations; forums.developer.nvidia.com/t/165802); with cudnn.benchmark the fastest "
               "algorithm runs.  Fitted by calibrate on FP32 CNN training rows (one value for all GPUs)"),
    Parameter(
        name="memory_efficiency", default=0.78, low=0.3, high=1.0, unit="fraction of HBM bandwidth",
        description="fraction of the datasheet memory bandwidth a streaming kernel reaches",
        source="chsasank/device-benchmarks README.md @ 7ccc883, device copy of ~380 MB (read + write): "
               "T4 240 of 320 GB/s (0.75), L4 235 of 300 (0.78), A10 469 of 600 (0.78), H100 PCIe "
               "1630 of 2000 (0.815); mean 0.78",
        per="architecture"),
    Parameter(
        name="sustained_clock_fraction", default=1.0, low=0.4, high=1.0, unit="fraction of kernel peak",
        description="share of an isolated kernel's compute rate that a GPU sustains through whole training "
                    "steps (clocks drop under the board power limit; kernels share L2 and HBM)",
        source="prior 1 (no derate); NVIDIA GPUs lower their SM clock to stay within TDP under sustained "
               "tensor-core load (nvidia-smi 'SW Power Cap' throttling; kernel.csv K0028: H100 fp16 GEMM "
               "668 TFLOP/s on long 10240^3 runs vs 760 at 4096^3); fitted per architecture on training rows",
        per="architecture", inherits=True),
    Parameter(
        name="elementwise_fusion", default=0.0, low=0.0, high=0.9, unit="fraction of bytes",
        description="share of the memory traffic of element-wise ops (activations, dropout, residual adds, "
                    "bias) that training frameworks save by fusing them into neighbouring kernels",
        source="prior 0 = every element-wise op is its own kernel; frameworks fuse many of them "
               "(Megatron-LM fused bias-GeLU and bias-dropout-add kernels, Shoeybi et al. 2019 / "
               "Korthikanti et al. 2022 Sec. 5; cuDNN fused BN + ReLU in NVIDIA DeepLearningExamples "
               "ResNet-50 NHWC); fitted by calibrate on training rows"),
    Parameter(
        name="kernel_launch_overhead", default=2e-6, low=0.0, high=2e-5, unit="s",
        description="time added per kernel: the GPU-side gap between back-to-back kernels",
        source="NVIDIA Technical Blog, A. Gray, 'Getting Started with CUDA Graphs' (2019): a 2.9 us "
               "kernel launched back to back takes 3.8 us per kernel on V100 (about 1 us gap), 9.6 us "
               "with a host synchronisation each time; 2 us allows for framework dispatch"),
    Parameter(
        name="host_dispatch_time", default=1e-5, low=0.0, high=3e-4, unit="s",
        description="host (framework) time to dispatch one kernel of a modelled op (the op tables count the "
                    "kernels each op launches: two gradient GEMMs backward, unfused attention's GEMMs, softmax "
                    "and dropout; an element-wise op may still stand for a few framework kernels); the host "
                    "dispatches asynchronously, so a pass "
                    "takes max(GPU work, kernels x this) (perfmodel.models.compute.queued_time): a step of many "
                    "short kernels is host-bound.  A trait of the software stack (how many kernels it launches "
                    "per op and what each costs its runtime), so it is fitted per framework; a framework whose "
                    "rows are never host-bound starts from the median of the stacks whose rows determine it "
                    "and is refitted on its own rows (partial pooling, perfmodel.calibration.fit.pool_groups): "
                    "evidence from one stack is evidence about the others, since the rows that show it, "
                    "TensorFlow 1 graphs (DeepLearningExamples) and eager PyTorch (nanotron, the Ultra-Scale "
                    "Playbook's single-node tensor-parallel runs, which stop speeding up below about 4.4 ms "
                    "per layer and micro-batch whatever the tensor-parallel degree or hidden size), both "
                    "point 10-20x above the 10 us prior",
        source="ASSUMPTION, prior 10 us: PyTorch eager dispatch plus cudaLaunchKernel (A. Gray, 'Getting "
               "Started with CUDA Graphs', NVIDIA blog, 2019, puts the bare launch at a few us) for the one to "
               "three kernels a modelled op stands for; this project's own fit of the NeuSight GEMM rows puts "
               "the module path of an nn.Linear call at 12.6 us over a bare torch.bmm call "
               "(gemm_linear_call_overhead), and NVIDIA/TransformerEngine#2053 (2025) measures the CPU time of one "
               "bf16 Linear forward on an H100 DGX (Xeon 8480C) at 13.5 us with torch, and TE's Linear at 2.5-2.7x "
               "torch's on Grace hosts; the bound 300 us allows a counted kernel to stand for a few kernels of a "
               "slow runtime (TensorFlow 1 graphs split a layer norm or a GELU into several ops); fitted per framework by calibrate on "
               "training rows.  An estimate at a value its framework's rows did not determine counts it "
               "uncertain by x2 at one standard error (perfmodel.models.compute.HOST_PRIOR_LOG_SIGMA).  "
               "calibrate starts it at 150 us (fit_start), where the host-bound rows of both stacks bind: "
               "from 10 us the pass's larger-of has no gradient and the fit cannot reach them",
        per="framework", fit_start=1.5e-4),
    Parameter(
        name="host_dispatch_scale", default=1.0, low=0.25, high=4.0, unit="x the reference host's time",
        description="how much longer than a DGX H100's host (2 x Xeon Platinum 8480C, the reference, held at 1) "
                    "the host of a GPU architecture's systems takes to dispatch a kernel: host_dispatch_time "
                    "(the framework's) x this (perfmodel.models.compute.host_dispatch_seconds).  The dispatch is "
                    "single-threaded Python and driver work, so it runs at the speed of one core of the host "
                    "CPU, and a GPU generation's rows come from the servers it shipped in: DGX-1 (2 x Xeon "
                    "E5-2698 v4, 2.2 GHz) and DGX-2 (2 x Xeon Platinum 8168) for Volta, DGX A100 (2 x AMD EPYC "
                    "7742, 2.25-3.4 GHz) for Ampere, DGX H100 (2 x Xeon Platinum 8480C, 2.0-3.8 GHz) for "
                    "Hopper.  The same Megatron-LM CI tests, in the same container, step 1.4-2.2x longer on a "
                    "DGX A100 than on a DGX H100 where the host sets the pace (checks/megatron_family_1node.csv), "
                    "against the model's 1.04-1.22 with one host time per framework.  Fitted per architecture "
                    "on training rows, relative to Hopper; an architecture without host-bound rows keeps 1 "
                    "(not pooled: a host generation says nothing about another's)",
        source="host CPUs: NVIDIA DGX-1 with Tesla V100 System Architecture white paper (WP-08437-002, 2017); "
               "NVIDIA DGX-2 data sheet (2018); NVIDIA DGX A100 data sheet (2020, 'Dual AMD Rome 7742, 128 "
               "cores total, 2.25 GHz (base), 3.4 GHz (max boost)'); NVIDIA DGX H100 data sheet (2023, 'Dual "
               "Intel Xeon Platinum 8480C, 112 cores total, 2.00 GHz (base), 3.80 GHz (max boost)').  "
               "ASSUMPTION: prior 1 (hosts alike), and a cloud instance or other server of a generation has "
               "a host like its DGX's; fitted per architecture by calibrate",
        per="architecture", poolable=False, reference_group="Hopper"),
    # --- Communication (alpha-beta collectives, perfmodel.models.comm)
    Parameter(
        name="link_bandwidth_efficiency", default=0.85, low=0.3, high=1.0, unit="fraction",
        description="large-message plateau of a ring's bus bandwidth as a share of the link's per-direction rate",
        source=("nvlink/nvswitch 0.80: sjeaugey in NVIDIA/nccl-tests#212 ('protocol overhead ~20%: 370 of 450 "
                "GB/s'), and dev rows ring busbw/per-direction A100 234.6/300, H100 368/450, H200 365.6/450, "
                "B200 679-698/900; infiniband 0.87: B200 8 x NDR ring rows 291-390/400 (together-nccl-tests "
                "use3a-ss and flapping-airplanes), A100 4 x HDR 96.45/100 (NVIDIA/nccl-tests#119); roce 0.95: "
                "H100 4 x RoCE-400 190/200 (NVIDIA/nccl#1368); efa 0.93: p5en ring 364.65/400 and p6-b200 "
                "380/400 (stas00/ml-engineering); other kinds (pcie, ethernet) 0.85, the dev-set median, "
                "no PCIe or Ethernet rows measured"),
        per="link_kind",
        group_defaults=(("nvlink", 0.80), ("nvswitch", 0.80), ("infiniband", 0.87), ("roce", 0.95),
                        ("efa", 0.93))),
    Parameter(
        name="link_latency", default=4.0e-6, low=1e-7, high=2e-4, unit="s",
        description="alpha: latency of one algorithm step over this kind of link",
        source=(f"{_NCCL}: hwLat Ring/LL128 NVLink 1.9 us, PCI 2.5 us, NET 4.0 us (default, also IB, RoCE, "
                "Ethernet); NVLink 1.9 us reproduces H100 8-GPU ring floor 35 us = 8.4 + 14 x 1.9 "
                "(together-nccl-tests H100 ring rows); efa 50 us fitted to p6-b200 4-node rows 128 KiB-256 MiB "
                "(stas00/ml-engineering; torch all_reduce_bench timing, so it includes framework overhead)"),
        per="link_kind",
        group_defaults=(("nvlink", 1.9e-6), ("nvswitch", 1.9e-6), ("pcie", 2.5e-6), ("efa", 50e-6))),
    Parameter(
        name="collective_base_latency", default=8.4e-6, low=1e-6, high=1e-4, unit="s",
        description="a0: fixed launch and synchronisation cost of one collective",
        source=f"{_NCCL}: baseLat Ring/Simple 8.4 us"),
    Parameter(
        name="tree_bandwidth_efficiency", default=0.54, low=0.2, high=1.0, unit="fraction",
        description="share of the links' plateau bandwidth NCCL's double binary tree reaches",
        source=(f"fitted to B200 8 x NDR tree rows: 2 nodes 335-339 GB/s, 4-64 nodes 192-196 GB/s "
                f"(together-nccl-tests); {_NCCL} likewise derates tree (busBw*0.92, per-channel caps)")),
    Parameter(
        name="nvls_bandwidth_efficiency", default=0.58, low=0.2, high=1.0, unit="fraction",
        description="NVLS all-reduce algbw as a share of the GPU's per-direction NVLink rate",
        source=("algbw plateau / per-direction NVLink: Hopper 0.61 (H100 273.8/450 together-nccl-tests, H200 "
                "275.6/450 stas00/ml-engineering; sjeaugey in NVIDIA/nccl-tests#212: 'algbw ~275GB/s'), "
                "Blackwell 0.54 (B200 NVLS busbw 844.35 -> algbw 482/900, together-nccl-tests); default "
                "their mean"),
        per="architecture",
        group_defaults=(("Hopper", 0.61), ("Blackwell", 0.54))),
    Parameter(
        name="nvls_tree_bandwidth_efficiency", default=0.9, low=0.2, high=1.0, unit="fraction",
        description="share of the NICs' plateau bandwidth the inter-node double binary tree of NCCL's NVLSTree "
                    "all-reduce reaches (NVLS reduces inside each node first)",
        source=(f"prior 0.9: {_NCCL} derates its trees' bus bandwidth by 0.9 (busBw*.9); fitted by calibrate "
                "on the NVLSTree rows (B200 8 x NDR busbw 275-291 GB/s at 4-46 nodes, together-nccl-tests; "
                "H200 EFA 310 GB/s, stas00/ml-engineering)")),
    Parameter(
        name="collnet_bandwidth_efficiency", default=0.9, low=0.2, high=1.0, unit="fraction",
        description="share of the NICs' plateau bandwidth NCCL's CollNet (InfiniBand SHARP: the switches "
                    "reduce) all-reduce reaches",
        source=(f"prior 0.9: {_NCCL} derates CollNet's bus bandwidth by 0.9 (busBw *= .9); fitted by "
                "calibrate on the CollNet rows (B200 8 x NDR with SHARP, busbw 533-606 GB/s at 2-64 nodes, "
                "together-nccl-tests)")),
    Parameter(
        name="nvls_latency", default=23e-6, low=1e-6, high=1e-4, unit="s",
        description="extra latency of an NVLS (NVSwitch multicast/reduce) collective",
        source=(f"{_NCCL}: hwLat NVLink NVLS/Simple 23 us; H100 NVLS floor 34.7 us ~ 8.4 + 23 "
                "(together-nccl-tests H100 nvls rows)")),
    Parameter(
        name="pipeline_fill", default=0.8, low=0.0, high=2.0, unit="dimensionless",
        description="c in t = L + W + c*sqrt(L*W): cost of filling the chunk pipeline at mid-size messages",
        source=("2 is the optimally segmented pipeline, t = (sqrt(L) + sqrt(W))^2 (Johnsson & Ho 1989, IEEE "
                "Trans. Computers 38(9), pipelined broadcast); 0.8 fitted to the together-nccl-tests H100 "
                "nvls/ring rows 4-128 MiB (e.g. NVLS 16 MiB 126 us, 128 MiB 587 us)")),
    Parameter(
        name="nvlink_mesh_ring_fraction", default=1.0, low=0.25, high=1.0, unit="fraction",
        description="share of the NVLinks among a group's GPUs that NCCL's rings use on a hybrid cube-mesh "
                    "(DGX-1; perfmodel.models.comm.mesh_ring_share counts the links)",
        source=("NVIDIA DGX-1 V100 system description: the hybrid cube-mesh is 'three interwoven rings of "
                "single NVLink connections', so 8-GPU rings can use all six links; not measured in the dev "
                "set: lower it by calibration on measured DGX-1 runs")),
    # --- Memory (perfmodel.models.memory)
    Parameter(
        name="framework_memory_bytes", default=1e9, low=2e8, high=5e9, unit="bytes",
        description="per-GPU memory outside the tensors: CUDA context, cuBLAS/cuDNN workspaces, NCCL buffers",
        source="CUDA context alone measured at 723 MiB and ~800 MB on the first CUDA call "
               "(discuss.pytorch.org/t/73021 and /t/81330, PyTorch 1.4-1.5); rounded up to 1 GB for "
               "library workspaces and NCCL communicator buffers; a prior for calibration"),
    Parameter(
        name="allocator_fragmentation", default=0.05, low=0.0, high=0.3, unit="fraction",
        description="memory the caching allocator reserves but cannot hand out, as a fraction of tensor bytes",
        source="prior, not a measurement: PyTorch's caching allocator rounds blocks up and splits 2 MiB/20 MiB "
               "segments; Rajbhandari et al. 2020 Sec. 3.2 reports out-of-memory with over 30 % still free "
               "in extreme cases (the upper bound here); calibrate on measured peaks"),
    Parameter(
        name="ddp_bucket_bytes", default=25 * 2**20, low=2**20, high=2**30, unit="bytes",
        description="size of one gradient all-reduce bucket; two are counted (one reducing, one filling)",
        source="PyTorch DistributedDataParallel default bucket_cap_mb=25 (MiB), torch/nn/parallel/distributed.py"),
    # --- Input pipeline (perfmodel.models.datapipe)
    Parameter("cpu_decode_rate", 300.0, 30.0, 3000.0, "samples/s per core",
              "JPEG decode + augmentation rate of one CPU core for ImageNet-sized images",
              "prior: order of a few hundred 224-px ImageNet images/s per core for PIL/libjpeg-turbo "
              "decode+crop+flip; NVIDIA DALI docs motivate GPU decoding by CPU-bound ResNet-50 input "
              "pipelines; fitted by calibrate() when input-bound rows exist"),
    Parameter("gpu_decode_rate", 3000.0, 300.0, 30000.0, "samples/s per GPU",
              "nvJPEG/DALI decode + augmentation rate of one GPU",
              "prior: DALI's documented purpose (offload decoding from the CPU); fitted by calibrate() "
              "when input-bound rows exist"),
    # --- Power and energy (perfmodel.models.power)
    Parameter(
        name="gpu_idle_fraction", default=0.15, low=0.02, high=0.5, unit="fraction of TDP",
        description="idle draw of a GPU as a fraction of its TDP, used when the catalog has no "
                    "measured idle_power",
        source="assumption: no vendor publishes idle power; nvidia-smi idle readings of SXM "
               "data-centre GPUs are about 50-60 W of 400 W (A100) and 70-100 W of 700 W (H100), "
               "i.e. 0.10-0.15 of TDP (practitioner reports, e.g. nemulai.com 'GPU electricity "
               "cost per training run' uses 15 %); nvidia-smi itself samples power only part of "
               "the time (Yang et al. 2023, arXiv:2312.02741)"),
    Parameter(
        name="host_power_per_node", default=2000.0, low=0.0, high=6000.0, unit="W",
        description="average power of everything in a node that is not a GPU (CPUs, DRAM, NICs, "
                    "NVSwitches, fans, storage)",
        source="assumption: about half the non-GPU share of the maximum system power in NVIDIA's "
               "DGX datasheets (DGX A100: 6.5 kW max - 8 x 400 W = 3.3 kW; DGX H100: 10.2 kW max - "
               "8 x 700 W = 4.6 kW); set it from a measured node for real numbers"),
    Parameter(
        name="pue", default=1.1, low=1.0, high=3.0, unit="ratio",
        description="power usage effectiveness of the data centre (total facility energy / IT energy)",
        source="hyperscale cloud data centres report about 1.1 (Google fleet trailing-twelve-month "
               "PUE 1.10, Google data centers efficiency page, 2023); the industry-wide average is "
               "1.58 (Uptime Institute Global Data Center Survey 2023) - use that for on-premises "
               "or colocation sites"),
    # --- Failures and checkpointing (perfmodel.models.preemption)
    Parameter(
    name="gpu_failure_rate_per_hour", default=419 / (16384 * 54 * 24), low=1e-7, high=1e-3,
    unit="1/(GPU h)",
    description="unexpected job interruptions per GPU-hour of a large synchronous training job",
    source="Llama 3 (Dubey et al. 2024, 'The Llama 3 Herd of Models', Sec. 3.3.4): 419 unexpected "
           "interruptions in a 54-day snapshot on 16,384 H100 GPUs = 419/(16384*54*24) = 1.97e-5 per GPU-hour "
           "(one every ~3.1 h at that scale)",
),
    # --- Step composition (the chain)
    Parameter("dp_overlap", 0.7, 0.0, 1.0, "fraction",
              "share of the last micro-batch's backward pass under which bucketed gradient "
              "reduction can hide",
              "prior: PyTorch DDP / Megatron overlap grad reduce with the backward pass (Li et al. "
              "2020, PyTorch Distributed, Sec. 3.2.3); the first bucket is ready only after part of "
              "the backward has run; fitted by calibrate()"),
    Parameter("overlap_interference", 0.2, 0.0, 1.0, "fraction",
              "slow-down of compute per second of data-parallel, ZeRO or offload communication hidden "
              "under it: the collective's kernels hold SMs for as long as it runs, also while they wait "
              "on a link (perfmodel.chain.exposed_communication)",
              "prior: NCCL kernels run on SMs (one CTA per channel) beside the GEMMs they overlap "
              "(NVIDIA NCCL user guide, NCCL_MAX_NCHANNELS / NCCL_MIN_CTAS), so hidden communication is "
              "not free; fitted by calibrate()"),
    Parameter("overlap_interference_per_byte", 2.0, 0.0, 4.0, "memory passes per byte",
              "compute time a hidden data-parallel, ZeRO or offload collective displaces per byte it moves "
              "through the GPU (nccl-tests bus bytes), in units of the GPU's memory time per byte: its "
              "copies and reductions contend with the GEMMs under it for HBM "
              "(perfmodel.chain.memory_charge_time); per byte, so the same gradients cost the compute "
              "under them the same whether the ring crosses NVLink or a slower network.  The upper "
              "bound keeps the charge below the collective's own time on every catalog GPU (HBM / "
              "link bandwidth >= 5.2, the A100-SXM4-40GB's), so hiding more never costs more",
              "prior (ASSUMPTION, shown as one): each step of a ring reduces a received chunk with the "
              "local one and forwards the result (Patarasuk and Yuan 2009, 'Bandwidth optimal "
              "all-reduce algorithms for clusters of workstations', J. Parallel Distrib. Comput. 69(2)), "
              "about two passes over this GPU's memory per byte moved; fitted by calibrate()"),
    Parameter("tp_overlap_interference", 0.2, 0.0, 1.0, "fraction",
              "slow-down of a weight-gradient GEMM per second of tensor-parallel collective hidden "
              "under it (Megatron's asynchronous input-gradient all-reduce / reduce-scatter)",
              "prior (assumption, shown as one): the NCCL kernel takes SMs from a GEMM of a few "
              "waves, which then runs an extra partial wave - a 132-block H100 GEMM beside a 24-block "
              "ncclAllGather nearly doubled (NVIDIA developer forum, 'Compute-Communication Overlap "
              "Causes Severe GEMM Performance Degradation because of Tail Effect', 2025); unlike "
              "overlap_interference it concerns one short GEMM, not a whole pass; fitted by calibrate()"),
    Parameter("zero3_overlap", 0.8, 0.05, 1.0, "fraction of dp_overlap",
              "share of dp_overlap a ZeRO-3/FSDP unit's parameter all-gather and gradient "
              "reduce-scatter keep: they hide under the compute of one unit (layer) at a time, "
              "not under a whole pass",
              "prior (assumption, shown as one): FSDP issues each unit's all-gather one unit ahead "
              "(backward_prefetch BACKWARD_PRE, limit_all_gathers; Zhao et al. 2023, PyTorch FSDP, "
              "Sec. 3.3-4.2) and DeepSpeed stage 3 prefetches stage3_prefetch_bucket_size ahead, so "
              "allocation waits and the rate limiter leave less room than a bucketed DDP all-reduce; "
              "fitted by calibrate()"),
    Parameter("zero3_prefetch_units", 1.0, 0.0, 4.0, "units (layers)",
              "ZeRO-3/FSDP units whose parameters are gathered ahead of the one computing "
              "(0: no prefetch, every gather exposed); each holds a gathered copy in memory",
              "PyTorch FSDP default backward_prefetch=BACKWARD_PRE prefetches the next unit "
              "(torch.distributed.fsdp.BackwardPrefetch docs); FSDP2 prefetches one unit in forward "
              "and backward by default; a framework setting, not fitted"),
    Parameter("zero3_gather_bucket_params", 1e10, 1e6, 1e10, "parameters",
              "most parameters one ZeRO-3 all-gather collects: a unit larger than this is gathered "
              "in several collectives, each paying the group's ring latency; the default (the upper "
              "bound) gathers any unit in one collective",
              "a framework setting, not fitted: PyTorch FSDP all-gathers each unit's FlatParameter in "
              "one collective (Zhao et al. 2023, PyTorch FSDP, Sec. 3.2) and FSDP2 one collective per "
              "fully_shard module (fsdp, composer, torchtitan); Megatron-FSDP all-gathers a unit module's "
              "sub-modules collectively unless enable_fine_grained_param_gather is set (NVIDIA/Megatron-LM "
              "megatron/core/distributed/fsdp/src/README.md @ 00611e6: nemo, megatron); DeepSpeed ZeRO "
              "stage 3 collects at most stage3_prefetch_bucket_size = 5e7 (deepspeed.ai/docs/config-json, "
              "ZeRO optimizations)",
              per="framework", group_defaults=(("deepspeed", 5e7),)),
    Parameter("step_overhead", 0.01, 0.0, 2.0, "s",
              "per-step overhead of a framework's training loop (Python, kernel launches not modelled "
              "per op, loss and metric syncs, logging)",
              "prior: order of a few ms to tens of ms seen in PyTorch step traces; the loop is the "
              "framework's code (a DeepLearningExamples script's per-step loss .item() and logging, "
              "Megatron-LM's timers, a TensorFlow graph's session call), so it is fitted per framework "
              "by calibrate(); an order of magnitude uncertain a priori",
              per="framework", prior_log_sigma=1.0),
    Parameter("gradient_reduce_bytes", 4.0, 2.0, 4.0, "bytes/parameter",
              "bytes per gradient in the data-parallel reduction",
              "PyTorch AMP keeps fp32 parameters so DDP reduces fp32 gradients; Megatron-LM "
              "accumulates and all-reduces gradients in fp32 for bf16 (accumulate_allreduce_grads_in_fp32, "
              "forced on for bf16) and in fp16 for fp16 training (perfmodel.chain.gradient_reduce_bytes)"),
    # --- Cost: spot interruptions, restarts, checkpoints (perfmodel.cost)
    Parameter(
        name="spot_interruptions_per_hour_aws", default=0.20 / _HOURS_PER_MONTH, low=0.0, high=1.0,
        unit="interruptions per instance-hour",
        description="rate at which one AWS spot instance is interrupted, by GPU architecture",
        source=f"{_AWS_GPU_BANDS} (Ampere = A100 0.10/730 h, Hopper = H100 0.20/730 h, Ada = L4 0.05/730 h); "
               f"other architectures: assumption from {_AWS_ADVISOR}, the top bucket '>20 %' read as 0.20 "
               "interruptions per instance-month (730 h) = 2.7e-4 per hour, a lower bound for that bucket",
        per="architecture",
        group_defaults=(("Ampere", 0.10 / _HOURS_PER_MONTH), ("Hopper", 0.20 / _HOURS_PER_MONTH),
                        ("Ada", 0.05 / _HOURS_PER_MONTH))),
    Parameter(
        name="spot_interruptions_per_hour_gcp", default=0.10 / 24.0, low=0.0, high=1.0,
        unit="interruptions per instance-hour",
        description="rate at which one GCP spot VM is preempted",
        source="assumption: the mid-point of the 5-15 % per day historical preemption rate formerly "
               "quoted in Google Compute Engine's preemptible VM documentation (not re-verified), "
               "0.10 / 24 h = 4.2e-3 per hour"),
    Parameter(
        name="spot_interruptions_per_hour_azure", default=0.20 / _HOURS_PER_MONTH, low=0.0, high=1.0,
        unit="interruptions per instance-hour",
        description="rate at which one Azure spot VM is evicted",
        source="assumption: Azure shows spot eviction-rate buckets like AWS's (0-5 % ... 20 %+); "
               "the top bucket read as 0.20 per instance-month as for AWS"),
    Parameter(
        name="spot_interruptions_per_hour_other", default=0.10 / 24.0, low=0.0, high=1.0,
        unit="interruptions per instance-hour",
        description="interruption rate of spot capacity from providers without their own default",
        source="assumption: the most pessimistic of the provider defaults (GCP's 5-15 %/day mid-point)"),
    Parameter(
        name="spot_capacity_nodes", default=16.0, low=1.0, high=1e5, unit="nodes",
        description="scale N_c of the probability exp(-(N - 1)/N_c) of holding N spot nodes of one "
                    "instance type at once; each restart waits restart_time / that probability",
        source="ASSUMPTION, no provider publishes it: spot capacity of one GPU type in one region is a small "
               "pool, so obtaining N nodes together gets harder with N (AWS's 'Spot placement score' "
               "rates a region 1-10 for a requested target capacity for this reason, EC2 User Guide "
               "'Spot placement score'); N_c = 16 gives 94 % for 2 nodes, 39 % for 16, 2 % for 64"),
    Parameter(
        name="spot_restart_time", default=600.0, low=0.0, high=7200.0, unit="s",
        description="time from an interruption until training runs again (replacement capacity, "
                    "container start, NCCL init, checkpoint load)",
        source="assumption: 10 minutes; AWS gives a 2-minute notice and replacement GPU capacity plus "
               "job start takes minutes; measure your own restart for real numbers"),
    Parameter(
        name="checkpoint_write_bandwidth_per_node", default=2e9, low=1e7, high=1e11, unit="B/s",
        description="rate at which one node writes its share of a checkpoint when the scenario does "
                    "not give run.checkpoint_write",
        source="assumption: about one parallel-file-system / object-store client per node at 2 GB/s "
               "(the scenario spec's example storage_bandwidth); set run.checkpoint_write for real numbers"),
    # --- fp8 GEMMs (perfmodel.models.gemm, perfmodel.models.compute: Transformer Engine fp8)
    Parameter(
        name="fp8_gemm_efficiency", default=0.88, low=0.3, high=1.0, unit="fraction of the bf16 GEMM efficiency",
        description="inner-loop efficiency of a large fp8 GEMM tile as a share of gemm_tensor_core_efficiency "
                    "(the bf16 one) of the same architecture: fp8 tensor cores reach a smaller share of their "
                    "doubled peak",
        source=f"{_KERNEL_CSV}: best-shape MAMF / dense peak on H100 SXM, fp8 1402.6/1979 = 0.709 and bf16 "
               "794.5/989.5 = 0.803, ratio 0.88 (the only GPU with both in the table; H200 fp8 0.73, B200 0.76, "
               "GB200 0.72 of their fp8 peaks); fitted per architecture by calibrate on the fp8 kernel.csv rows",
        per="architecture"),
    # --- Software stack: traits of the training framework (vocabulary.FRAMEWORKS); an absent or
    # unfitted framework gets the pooled (median) value.  step_overhead above is one too (session 15;
    # a per-framework multiple of a global step_overhead, tried before, was undetermined everywhere).
    Parameter(
        name="framework_compute_efficiency", default=1.0, low=0.4, high=2.5, unit="x the kernel model's rate",
        description="speed of a framework's forward and backward kernels relative to the per-op kernel model "
                    "(fused kernels, kernel selection, memory layouts): every compute time is divided by it",
        source="prior 1 (the kernel model as is); the issue's observation that one model on one GPU differs "
               "1.5-2x between published containers (NVIDIA DeepLearningExamples PyTorch vs TensorFlow vs "
               "MXNet, Lambda, MLPerf) for the same op counts; fitted per framework by calibrate on training rows",
        per="framework", prior_log_sigma=0.3),
)

PARAMETERS: dict[str, Parameter] = {parameter.name: parameter for parameter in _TABLE}
