"""Workloads: a model as a table of ops (FLOPs, bytes, parameters, saved activations per op).

``transformer(...)`` and ``cnn(name, layer_table)`` build workloads; ``get_workload(name)`` looks
one up in the zoo (``ZOO_NAMES``) or among the user's registered models; ``workload_from_spec``
turns a scenario's ``workload:`` section into one; ``load_hf_config(path)`` reads a HuggingFace
``config.json``.
"""

from perfmodel.workloads.cnn import cnn
from perfmodel.workloads.hf import load_hf_config
from perfmodel.workloads.ops import OP_KINDS, OpTable
from perfmodel.workloads.transformer import TransformerShape, moe_all_to_all_bytes, transformer
from perfmodel.workloads.workload import PRECISIONS, Workload
from perfmodel.workloads.zoo import (ZOO_NAMES, get_workload, load_workloads_yaml, register_workload,
                                     workload_from_spec)

__all__ = ["OP_KINDS", "OpTable", "PRECISIONS", "TransformerShape", "Workload", "ZOO_NAMES", "cnn",
           "get_workload", "load_hf_config", "load_workloads_yaml", "moe_all_to_all_bytes", "register_workload",
           "transformer", "workload_from_spec"]
