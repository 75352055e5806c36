"""The words a training plan is written in, defined once for every layer: training precisions,
bytes per element, recomputation strategies, optimizers and training frameworks.

The scenario schema, the op tables, the cost models and the plan arrays all read these tuples,
so a new precision or strategy is added here and nowhere else.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["TRAIN_PRECISIONS", "MIXED_PRECISIONS", "FULL_PRECISIONS", "ELEMENT_BYTES", "ACTIVATION_BYTES",
           "GEMM_OUTPUT_BYTES", "RECOMPUTE_STRATEGIES", "OPTIMIZERS", "OFFLOAD_TARGETS", "FRAMEWORKS", "FRAMEWORK_FLASH_ATTENTION",
           "CONV_TRANSPOSE_PRECISIONS", "FRAMEWORK_CHANNELS_LAST",
           "FRAMEWORK_FLASH_ATTENTION_ASSUMED", "ASYNC_TENSOR_CORE_ARCHITECTURES", "ASYNC_ATTENTION_FRAMEWORKS",
           "FRAMEWORK_SEQUENCE_PARALLEL", "FRAMEWORK_LACKS",
           "ZERO3_REGATHER_ON_RECOMPUTE", "DP_REDUCE_AFTER_BACKWARD", "TP_DGRAD_OVERLAP",
           "HALF_PRECISION_GRADIENT_REDUCE", "FRAMEWORK_BINNED_TOKENS", "GRAPH_FRAMEWORKS", "framework_from_text",
           "HARNESSES", "Harness", "harness_of", "harness_model"]

TRAIN_PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")
# 16-bit (or fp8) compute with fp32 master weights and optimizer state (mixed precision), and
# training whose weights, gradients and activations are all 32-bit
MIXED_PRECISIONS = ("fp16", "bf16", "fp8")
FULL_PRECISIONS = ("fp32", "tf32")

# Bytes of one GEMM input element in the precision's storage format.
ELEMENT_BYTES = {"fp32": 4.0, "tf32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0}
# Bytes per activation/weight element as the training step moves and saves them.  FP8 training
# keeps activations in 16-bit between GEMMs (Transformer Engine casts to FP8 only inside the
# GEMM), so fp8 counts 2 bytes like fp16/bf16.
ACTIVATION_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 2}
# FP8 GEMMs write their output in BF16 (cuBLASLt FP8 matmuls with a 16-bit D matrix).
GEMM_OUTPUT_BYTES = {**ELEMENT_BYTES, "fp8": 2.0}

# activation recomputation strategies (perfmodel.models.recompute); plan arrays carry their index
RECOMPUTE_STRATEGIES = ("none", "selective", "full", "every_k", "sqrt")
OPTIMIZERS = ("adam", "sgd")
# what a plan keeps in host memory instead of GPU memory (perfmodel.models.memory.apply_offload);
# plan arrays carry the index, whose bit 0 is the optimizer state and bit 1 the weights
OFFLOAD_TARGETS = ("none", "optimizer", "weights", "optimizer+weights")

# The software stack that runs the training step (scenario ``framework``, measurement column
# ``framework``): each name groups the per-framework parameters of perfmodel.parameters
# (``per="framework"``); an absent or unfitted framework gets the pooled value.
#   megatron        NVIDIA Megatron-LM (Megatron-Core), PTD-P
#   megatron-2019   Megatron-LM as released with Shoeybi et al. 2019 (arXiv:1909.08053): tensor
#                   parallelism only, apex FP16_Optimizer, gradients all-reduced in fp16 after the
#                   backward pass (its training loop's model.allreduce_params), tensor-parallel
#                   input-gradient all-reduces synchronous (mpu _CopyToModelParallelRegion.backward);
#                   before the PTD-P code base of Narayanan et al. 2021 (pipelines, fused
#                   bias-GeLU / bias-dropout-add / scale-mask-softmax kernels) and the later
#                   asynchronous tensor-parallel all-reduce.  A stack of its own: on the shipped rows, the 2021-22
#                   A100 Megatron-LM runs want no per-step overhead while the 2019 V100 runs, fitted
#                   as one framework, pulled step_overhead[megatron] to 0.52 s
#   nemo            NVIDIA NeMo (Megatron-Core based), including NVIDIA's MLPerf GPT-3 submissions
#   deepspeed       Microsoft DeepSpeed (ZeRO), including Megatron-DeepSpeed
#   fsdp            plain PyTorch FSDP training scripts (e.g. IBM fms-fsdp)
#   composer        MosaicML Composer / llm-foundry (PyTorch FSDP underneath)
#   torchtitan      pytorch/torchtitan (FSDP2, TP, PP, CP, torch.compile)
#   nanotron        huggingface/nanotron (eager PyTorch 3D parallelism; the Ultra-Scale Playbook's runs)
#   pytorch         plain PyTorch (DDP) scripts not listed above
#   dle-pytorch     NVIDIA DeepLearningExamples PyTorch recipes in NGC containers (also the
#                   DeepLearningExamples-based scripts of lambdal/deeplearning-benchmark)
#   dle-tensorflow  NVIDIA DeepLearningExamples TensorFlow 1/2 recipes in NGC containers
#   dle-mxnet       NVIDIA DeepLearningExamples MXNet recipes in NGC containers
#   dle-paddle      NVIDIA DeepLearningExamples PaddlePaddle recipes in NGC containers
#   tensorflow, jax other TensorFlow or JAX training code
FRAMEWORKS = ("megatron", "megatron-2019", "nemo", "deepspeed", "fsdp", "composer", "torchtitan", "nanotron",
              "pytorch", "dle-pytorch", "dle-tensorflow", "dle-mxnet", "dle-paddle", "tensorflow", "jax")

# Plan settings a framework's code does not have: a scenario that states one of them for that
# framework is refused (field: (the one value it can run, the feature it lacks)).
#   megatron-2019  Megatron-LM as released with Shoeybi et al. 2019 (arXiv:1909.08053): tensor and
#                  data parallelism only -- pipeline parallelism came with PTD-P (Narayanan et al.
#                  2021), sequence parallelism with Korthikanti et al. 2022, FlashAttention (Dao et
#                  al. 2022) later still, and it had no sharded optimizer (ZeRO); interleaved
#                  pipeline stages came with PTD-P and context parallelism with Megatron-Core (2023)
# A choice or a search never proposes them for that framework (perfmodel.plans.within_framework),
# and each is also the framework's default of that setting (the dicts below take it from here).
FRAMEWORK_LACKS = {"megatron-2019": {"pp": (1, "pipeline parallelism (PTD-P, 2021)"),
                                     "vp": (1, "interleaved pipeline stages (PTD-P, 2021)"),
                                     "cp": (1, "context parallelism (Megatron-Core, 2023)"),
                                     "sequence_parallel": (False, "sequence parallelism (2022)"),
                                     "flash_attention": (False, "FlashAttention (2022)"),
                                     "zero": (0, "sharded optimizer (ZeRO)")}}


def _lacked(field: str) -> dict:
    """{framework: the one value its code runs} of the frameworks that lack ``field`` (FRAMEWORK_LACKS)."""
    return {framework: lacked[field][0] for framework, lacked in FRAMEWORK_LACKS.items() if field in lacked}


# Whether a framework runs attention as one fused kernel (FlashAttention, Dao et al. 2022,
# arXiv:2205.14135, or Transformer Engine's cuDNN fused attention) when a scenario or measurement
# row does not say (plan ``flash_attention``).  Unfused attention writes the s x s score matrix and
# reads it back through softmax and dropout, which makes a short-hidden model much slower.
#   True   composer (llm-foundry's MPT attn_config.attn_impl: 'flash' or 'triton', both fused),
#          nanotron (its Llama CoreAttention calls flash_attn_varlen_func; huggingface/nanotron
#          src/nanotron/models/llama.py),
#          torchtitan (F.scaled_dot_product_attention: its flash backend on sm80+), nemo (Megatron-Core
#          with Transformer Engine's DotProductAttention, which selects flash or cuDNN fused attention)
#   False  megatron-2019 (FRAMEWORK_LACKS), the DeepLearningExamples recipes (their BERT/Transformer
#          modeling code computes QK^T, softmax, dropout and PV as separate ops) and TensorFlow, MXNet
#          and PaddlePaddle stacks without a FlashAttention kernel
#   absent version-dependent: megatron (Megatron-LM's own attention is fused only with
#          --use-flash-attn, an opt-in since 2023; Megatron-Core with Transformer Engine picks a fused
#          backend by default; the 2021-2022 papers' runs predate FlashAttention), deepspeed
#          (Megatron-DeepSpeed's --use-flash-attn is opt-in), fsdp and pytorch (the model code
#          decides), jax.  Those take FRAMEWORK_FLASH_ATTENTION_ASSUMED's kernel, else the GPU's
#          default (fused on Ampere and newer), and the estimate lists it as an assumption
#          (perfmodel.plans.flash_attention_assumed) whose other case widens the interval.
FRAMEWORK_FLASH_ATTENTION = {"composer": True, "torchtitan": True, "nemo": True, "nanotron": True,
                             **_lacked("flash_attention"),
                             "dle-pytorch": False, "dle-tensorflow": False, "dle-mxnet": False,
                             "dle-paddle": False, "tensorflow": False}
# The kernel a version-dependent framework is assumed to run when the plan does not say, where the
# evidence points one way (still listed as an assumption):
#   megatron  unfused: Megatron-LM's own transformer runs FlashAttention only with --use-flash-attn
#             (store_true, default off), and every shipped Megatron-LM row (Narayanan et al. 2021,
#             Korthikanti et al. 2022) ran unfused; Megatron-Core with Transformer Engine, the newer
#             default, fuses -- hence an assumption, not a default of FRAMEWORK_FLASH_ATTENTION.
FRAMEWORK_FLASH_ATTENTION_ASSUMED = {"megatron": False}

# Convolution layouts (Plan.channels_last).  cuDNN's 16-bit tensor-core convolution kernels take
# NHWC (channels-last) tensors; given NCHW ones, cuDNN transposes them to NHWC and back around the
# convolution (NVIDIA cuDNN documentation, Legacy API, "Tensor Transformations"), so a CNN held NCHW
# pays extra memory passes on every convolution at these precisions (fp8 training runs its
# convolutions in bf16; perfmodel.workloads.cnn.transpose_bytes).  FP32 runs on CUDA cores, which
# read NCHW directly.  ASSUMPTION (shown where it matters): TF32 convolutions need no transposes
# either -- NVIDIA's own speed-tuned recipes hold NHWC at 16 bits only and NCHW at TF32
# (DeepLearningExamples' PyTorch ConvNets configs.yml, MXNet RN50 runner, PaddlePaddle RN50 TF32
# scripts; TensorFlow's layout optimizer switches to NHWC only when most convolutions are fp16),
# which they would not do if NCHW cost TF32 the ~30 % it costs fp16.
CONV_TRANSPOSE_PRECISIONS = ("fp16", "bf16", "fp8")
# The precisions at which a framework's recipes hold a CNN channels-last (NHWC) when a plan does not
# say; at every other precision they hold it NCHW, the default memory format of PyTorch
# (torch.contiguous_format), MXNet and PaddlePaddle.  A framework absent here (pytorch, jax, the LLM
# stacks, or none stated) has no recipe: NCHW is assumed and the estimate lists it
# (perfmodel.plans.channels_last_assumed).  Sources (NVIDIA/DeepLearningExamples):
#   dle-pytorch     AMP: PyTorch/Classification/ConvNets/configs.yml gives every AMP entry
#                   `memory_format: nhwc`, TF32/FP32 none (main.py's --memory-format defaults to
#                   nchw); Detection/SSD main.py's --data-layout defaults to channels_last;
#                   Segmentation/nnUNet scripts/benchmark.py adds --layout NDHWC for AMP in 3-D;
#                   Segmentation/MaskRCNN config defaults.py sets _C.NHWC = True.  Rows whose run
#                   differs say so in their channels_last column (nnU-Net 2-D; the 2020 NGC 20.06
#                   ConvNets scripts) or through their harness (Lambda's scripts, which call main.py
#                   without --memory-format: HARNESSES).
#   dle-mxnet       MxNet/Classification/RN50v1.5 runner: float16 passes --conv-layout NHWC
#                   --batchnorm-layout NHWC --pooling-layout NHWC; float32 the NCHW defaults.
#   dle-paddle      PaddlePaddle/Classification/RN50v1.5: the AMP benchmark command passes
#                   --data-layout NHWC; the TF32 scripts take the NCHW default.
#   dle-tensorflow, tensorflow  TensorFlow's layout optimizer (grappler GenericLayoutOptimizer:
#                   NHWC when at least half the convolutions are fp16 on Volta or newer, else NCHW
#                   on a GPU) and XLA's GPU layout assignment (NHWC for fp16 on Volta and newer)
#                   pick the layout at run time, whatever the script's data_format.
FRAMEWORK_CHANNELS_LAST: dict[str, tuple[str, ...]] = {
    "dle-pytorch": ("fp16", "bf16"), "dle-mxnet": ("fp16",), "dle-paddle": ("fp16",),
    "dle-tensorflow": ("fp16",), "tensorflow": ("fp16",)}

# GPU architectures whose tensor cores are fed asynchronously (Hopper: warpgroup MMA, ``wgmma``, with
# operands brought in by the Tensor Memory Accelerator; Blackwell: ``tcgen05`` MMA): a fused attention
# kernel written for them overlaps its softmax with the next block's matmuls, which a
# FlashAttention-2-class kernel (synchronous ``mma.sync``, written for Ampere) cannot.  FlashAttention-3
# (Shah et al. 2024, arXiv:2407.08608, abstract) runs 1.5-2.0x faster than FlashAttention-2 on H100
# (FP16 at up to 75 % of the peak, against 35 % for FlashAttention-2), and NVIDIA's cuDNN fused
# attention is of that class.
ASYNC_TENSOR_CORE_ARCHITECTURES = ("Hopper", "Blackwell")

# Frameworks whose fused attention on those architectures is such a kernel: NeMo, whose Transformer
# Engine DotProductAttention "prefers cuDNN flash attention on Hopper+ architectures, and Tri Dao
# flash attention on pre-Hopper" when both apply (NVIDIA/NeMo PR #9188, docs memory_optimizations.rst).
# Megatron-LM is not listed: its kernel depends on version and flags (Tri Dao's flash-attn with
# --use-flash-attn, or Transformer Engine's choice; FlagPerf's Megatron-Core Llama-3-8B run states
# FlashAttention-2).  It, every other stack's fused attention (flash-attn 2 in llm-foundry and
# nanotron, PyTorch's SDPA flash backend) and a framework not stated count as FlashAttention-2 class
# (perfmodel.models.compute.attention_factor, parameter ``attention_async_kernel_gain``).
ASYNC_ATTENTION_FRAMEWORKS = ("nemo",)

# Whether a framework shards the layer norms, dropouts and residual adds of tensor-parallel layers
# over the sequence (sequence parallelism, Korthikanti et al. 2022) when the plan does not say, for
# frameworks with a default of their own: Megatron-LM's --sequence-parallel is a store_true flag
# (NVIDIA/Megatron-LM megatron/training/arguments.py, default off), and the 2021 PTD-P runs predate
# it.  Any other framework (NeMo's and torchtitan's tensor-parallel recipes turn it on, or none
# stated) runs it whenever tp > 1.  The estimate lists the Megatron-LM default as an assumption.
FRAMEWORK_SEQUENCE_PARALLEL = {"megatron": False, **_lacked("sequence_parallel")}

# The ZeRO stage a framework runs when the plan does not say, for frameworks with a default of their
# own (0: every data-parallel rank keeps the whole optimizer state; 3: parameters, gradients and
# optimizer state sharded, PyTorch FSDP's FULL_SHARD):
#   0  megatron: the distributed optimizer (ZeRO-1) is opt-in, --use-distributed-optimizer is a
#      store_true flag (NVIDIA/Megatron-LM megatron/training/arguments.py), and the 2021-22 papers'
#      runs predate it; the DeepLearningExamples recipes (PyTorch DDP / apex, Horovod for
#      TensorFlow and MXNet, PaddlePaddle fleet data parallelism), TensorFlow and plain PyTorch
#      (DistributedDataParallel) have no sharded optimizer
#   3  fsdp: ShardingStrategy.FULL_SHARD is FullyShardedDataParallel's default (PyTorch FSDP docs);
#      torchtitan: fully_shard over the whole data-parallel mesh (data_parallel_shard_degree -1,
#      its default)
# Any other framework (DeepSpeed, NeMo, Composer: their configs say; none stated) leaves the stage to
# the plan choice.  The estimate lists the default as an assumption.
FRAMEWORK_ZERO = {"megatron": 0, **_lacked("zero"), "dle-pytorch": 0, "dle-tensorflow": 0, "dle-mxnet": 0,
                  "dle-paddle": 0, "tensorflow": 0, "pytorch": 0, "fsdp": 3, "torchtitan": 3}

# Tokens a sample holds on average in a framework's BERT pre-training recipe, when a scenario or
# measurement row gives no ``mean_seq_len``: {framework: {seq_len: tokens}}.  NVIDIA
# DeepLearningExamples' PyTorch and PaddlePaddle BERT recipes load their data with NVIDIA's LDDL,
# which pads a mini-batch only to its longest sequence (NVIDIA/LDDL README @ 0ca9036d), and bin
# phase 2 (seq_len 512) at a bin size of 64 (PyTorch scripts/configs/pretrain_config.sh @ a9e2c1d5:
# "All configs using bin size=64 with phase2 by default"; PaddlePaddle's README changelog: "Binned
# pretraining for phase2 with LDDL using a bin size of 64").  279 tokens: Wikipedia's phase-2
# length histogram (graphcore/tutorials blogs_code/packedBERT/histograms.py @ e9dbe482; Krell et al.
# 2021, arXiv:2107.02027) has a mean of 255.8 tokens, 279.2 with each sample rounded up to its
# 64-token bin's upper edge -- ASSUMPTION: a mini-batch of one bin reaches the bin's edge.  Phase 1
# (seq_len 128) is not binned and Wikipedia fills it; SQuAD fine-tuning (384) pads every sample.
# TensorFlow's recipes read padded TFRecords.  The estimate lists the default as an assumption.
FRAMEWORK_BINNED_TOKENS = {"dle-pytorch": {512: 279}, "dle-paddle": {512: 279}}

# Frameworks that trace a training step into a graph instead of dispatching its ops one by one from
# Python: TensorFlow (tf.function / XLA; NVIDIA DeepLearningExamples' TensorFlow 2 Mask R-CNN takes
# its anchor matching, sampling and proposal selection batched over the images at fixed sizes) and
# JAX (jit).  Python-side bookkeeping an eager framework dispatches op by op (ops marked
# ``eager_only``) costs them no host dispatch (perfmodel.models.compute.framework_runs).
GRAPH_FRAMEWORKS = ("dle-tensorflow", "tensorflow", "jax")

# Benchmark harnesses whose launch scripts fix what a measurement row's ``model`` and ``intra``
# columns do not show, recognised by the row's software text (a :class:`Harness` each).
#   lambdal/deeplearning-benchmark (its rows: "DLE-based Lambda scripts", "Lambda 'v2' suite"):
#   - runs DeepLearningExamples' Transformer-XL train.py with model flags only -- no --config_file
#     and no --adaptive (pytorch/scripts/config_v1/config_pytorch_*.sh, config_v2/config_pytorch_80GB.sh
#     @ bec5f14c) -- so train.py's defaults apply: one softmax over all 267,735 words tied to a
#     full-width embedding (its stored log pytorch/results/1080Ti/PyTorch_transformerxlbase_FP16
#     prints adaptive=False, #params = 191948759), the zoo's transformer-xl-*-full-softmax, not the
#     adaptive-softmax models DeepLearningExamples' own README tables ran (wt103_{base,large}.yaml);
#   - runs DeepLearningExamples' ConvNets main.py directly with the config's flags, never through
#     launch.py and configs.yml, and passes no --memory-format (scripts/config_v1/config_pytorch_80GB.sh,
#     config_v2/config_pytorch_80GB.sh @ bec5f14c: `--amp --static-loss-scale 256 ...`), so its CNNs
#     run in main.py's default NCHW layout, not the recipe's NHWC; its SSD fork has no layout option;
#   - exports NCCL_P2P_DISABLE=1 before every multi-GPU launch (pytorch/scripts/benchmark_pytorch.sh
#     @ 0a684b62; another stored version, @ f83874d8, does not, and which one ran the published
#     tables is not recorded), so NCCL moves data through host memory over each GPU's PCIe link
#     instead of NVLink: the reading the shipped rows state and the shipped profile was fitted
#     under (data/measurements/README.md).


class Harness(NamedTuple):
    pattern: re.Pattern        # matches the software text of the harness's rows
    models: dict[str, str]     # zoo model a row names -> the model the scripts build
    models_why: str
    peer_to_peer: bool         # False: intra-node collectives over the GPU's PCIe link (NCCL_P2P_DISABLE)
    peer_to_peer_why: str
    channels_last: bool | None  # the CNN layout its scripts run (None: the framework's recipe)
    channels_last_why: str


HARNESSES = (Harness(re.compile(r"\blambda\b", re.IGNORECASE),
                     {"transformer-xl-base": "transformer-xl-base-full-softmax",
                      "transformer-xl-large": "transformer-xl-large-full-softmax"},
                     "Lambda's deeplearning-benchmark scripts run Transformer-XL's train.py without --adaptive",
                     False, "Lambda's deeplearning-benchmark scripts export NCCL_P2P_DISABLE=1",
                     False, "Lambda's deeplearning-benchmark scripts run main.py without --memory-format "
                            "(its default NCHW)"),)


def harness_of(software: str | None) -> Harness | None:
    """The :data:`HARNESSES` entry whose pattern ``software`` matches, else None."""
    if not isinstance(software, str):
        return None
    return next((harness for harness in HARNESSES if harness.pattern.search(software)), None)


def harness_model(model: str, software: str | None) -> tuple[str, str] | None:
    """(model as built, why) when ``software`` names a harness that builds ``model`` differently
    from the zoo's recipe; None otherwise."""
    harness = harness_of(software)
    if harness is None or model not in harness.models:
        return None
    return harness.models[model], harness.models_why


# Frameworks that place pipeline stages by compute cost instead of splitting the layers evenly and
# putting the output layer on the last stage: nanotron's build_model (huggingface/nanotron
# src/nanotron/models/base.py @ 01de8d9, "Balance compute across PP blocks") weighs a decoder layer
# 4 heads d_head h + 3 ffn h and the LM head vocab h (its models' get_block_compute_costs) and cuts
# the stages at equal shares of the cumulative cost (perfmodel.models.stages.cost_balanced_stages),
# so a 131k-word LM head gets a stage of its own.  Megatron-LM and the others split the layers
# (perfmodel.models.stages.stage_layers).  The memory a plan needs still follows the even split.
COST_BALANCED_STAGES = ("nanotron",)

# Frameworks whose ZeRO-3 gathers a layer's parameters again for the recomputed forward pass of
# activation checkpointing: DeepSpeed's forward hooks (parameter_offload.py,
# pre_sub_module_forward_function) fire during the recomputation inside the backward pass and its
# post-forward hooks release the parameters again (deepspeedai/DeepSpeed issue #4784, 2023).
# ASSUMPTION for the FSDP-based stacks (fsdp, composer, torchtitan), not listed: PyTorch FSDP's
# pre-backward hook unshards a layer before its recomputation runs, and the recomputed forward
# reuses those parameters instead of gathering them again (not verified against a trace here).
ZERO3_REGATHER_ON_RECOMPUTE = ("deepspeed",)

# Frameworks whose data-parallel gradient all-reduce / reduce-scatter (ZeRO 0-2) runs after the
# backward pass and whose distributed optimizer gathers the updated parameters before the next
# forward pass, neither overlapped with compute unless the run opts in: Megatron-Core's
# DistributedDataParallelConfig has overlap_grad_reduce = False and overlap_param_gather = False
# (NVIDIA/Megatron-LM megatron/core/distributed/distributed_data_parallel_config.py; Megatron-LM's
# --overlap-grad-reduce and --overlap-param-gather are opt-in flags).  The others (PyTorch DDP's
# bucketed all-reduce, FSDP, NeMo's recipes) overlap under dp_overlap.  ZeRO-3 is not affected.
DP_REDUCE_AFTER_BACKWARD = ("megatron", "megatron-2019")

# Frameworks whose tensor-parallel linear layers launch the column-parallel GEMM's input-gradient
# all-reduce (reduce-scatter with sequence parallelism) asynchronously in the backward pass and
# compute that GEMM's weight gradient meanwhile, so each backward tensor-parallel collective hides
# under a weight-gradient GEMM as far as that GEMM lasts: Megatron-Core's
# LinearWithGradAccumulationAndAsyncCommunication.backward (NVIDIA/Megatron-LM
# megatron/core/tensor_parallel/layers.py: all_reduce(grad_input, async_op=True), "scheduled
# before the weight gradient computation"), which Megatron-LM and NeMo run; Megatron-DeepSpeed keeps
# Megatron-LM's async_grad_allreduce.  Every other framework's tensor-parallel collectives (PyTorch
# DTensor tensor parallelism; torchtitan's async TP is opt-in) are exposed whole.
TP_DGRAD_OVERLAP = ("megatron", "nemo", "deepspeed")

# Frameworks that reduce fp16-trained gradients in fp16 (2 bytes per parameter) rather than fp32:
# Megatron-LM keeps its gradient buffer in the parameters' dtype unless
# --accumulate-allreduce-grads-in-fp32 is given, which it forces on only for bf16
# (NVIDIA/Megatron-LM megatron/training/arguments.py: "accumulate and all-reduce gradients in fp32
# for bfloat16 data type").  Other stacks (PyTorch AMP's DDP and FSDP: fp32 parameters) reduce
# fp32 gradients: the gradient_reduce_bytes parameter.
HALF_PRECISION_GRADIENT_REDUCE = ("megatron", "megatron-2019")

# how free text (the measurement spec's ``framework`` column, e.g. "Megatron-LM (PTD-P)" or "PyTorch
# (NGC 21.03)") names a framework: the first rule whose word occurs in the text (or, for the
# DeepLearningExamples recipes, in the row's source) wins; stacks built on another come first
# (NeMo and Megatron-DeepSpeed run on Megatron; Composer on FSDP)
_FRAMEWORK_WORDS = (("nemo", "nemo"), ("deepspeed", "deepspeed"), ("torchtitan", "torchtitan"),
                    ("composer", "composer"), ("llm-foundry", "composer"), ("nanotron", "nanotron"),
                    ("megatron-lm (2019)", "megatron-2019"), ("megatron", "megatron"),
                    ("fsdp", "fsdp"))
_DLE_LANGUAGES = (("tensorflow", "dle-tensorflow"), ("tf1", "dle-tensorflow"), ("tf2", "dle-tensorflow"),
                  ("mxnet", "dle-mxnet"), ("paddle", "dle-paddle"), ("pytorch", "dle-pytorch"))
_PLAIN = (("tensorflow", "tensorflow"), ("jax", "jax"), ("pytorch", "pytorch"))


def framework_from_text(text: str | None, source: str | None = None) -> str | None:
    """The :data:`FRAMEWORKS` name free text describes, or None when it names none of them.

    A vocabulary name is itself; otherwise the ordered word rules above: a stack's own name
    (NeMo, DeepSpeed, torchtitan, Composer/llm-foundry, Megatron, FSDP); an NVIDIA
    DeepLearningExamples recipe (the text or the source says DeepLearningExamples, DLE or an NGC
    container) is ``dle-<language>``; else plain TensorFlow, JAX or PyTorch.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    lowered = text.strip().lower()
    if lowered in FRAMEWORKS:
        return lowered
    for word, name in _FRAMEWORK_WORDS:
        if word in lowered:
            return name
    context = f"{lowered} {source.lower() if isinstance(source, str) else ''}"
    if re.search(r"deeplearningexamples|\bdle\b|\bngc\b", context):
        for word, name in _DLE_LANGUAGES:
            if word in lowered:
                return name
    for word, name in _PLAIN:
        if word in lowered:
            return name
    return None
