"""The malformed-input battery of issue 12, run through the command line.

One case per input: a YAML alias bomb, deep nesting, a huge integer, a binary file, a path that is
a directory, a foreign database, a nan flag, ...  Each case asserts the exit status (2 = bad
input, 3 = valid input but nothing feasible, 0 = a valid input still answers), that no Python
traceback is printed, that the message names the file / field / value, that the output is short
(an excerpt, never the expanded input) and that it took less than a time bound.  The alias bombs
also run in a subprocess under a 1 GiB address-space limit (the memory bound).
"""

from __future__ import annotations

import os
import resource
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
import yaml

from perfmodel.cli import main

ROOT = Path(__file__).parent.parent
EXAMPLE = str(ROOT / "examples" / "bert-large-8xv100.yaml")
MEASUREMENTS = sorted((ROOT / "data" / "measurements").glob("*.csv"))
SECONDS = 10.0  # per case, in-process
MAX_MESSAGE_CHARS = 20_000  # an error is at most ~100 lines, never the expanded input (MBs)

GOOD = {"workload": {"model": "gpt3-125m"},
        "hardware": {"gpu": "H100-SXM5-80GB", "num_gpus": 8, "gpus_per_node": 8}}

CSV_HEADER = "id,kind,gpu,num_gpus,model,precision,tp,pp,dp,micro_batch,global_batch,metric,value,source"
CSV_ROW = "r{i},train,A100-SXM4-80GB,{gpus},gpt3-1.3b,bf16,1,1,{gpus},4,{batch},step_time_s,1.5,test"

USER_GPU = {"name": "X1000", "vendor": "Acme", "architecture": "Hopper", "memory": "100 GB",
            "memory_bandwidth": "4 TB/s", "peak_flops": {"bf16": "1000 TFLOP/s"}, "tdp": "700 W",
            "source": "made up for a test"}


def alias_bomb(levels: int = 9) -> str:
    """The billion-laughs document: ``levels`` lists of 9 aliases of the previous one."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 9) + "]")
    return "\n".join(lines)


def indented(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in text.splitlines())


def scenario_yaml(**sections) -> str:
    data = {key: dict(value) for key, value in GOOD.items()}
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    return yaml.safe_dump(data)


def scenario_with(section: str, line: str) -> str:
    """GOOD with a raw YAML ``line`` (say a 5,000-digit integer) added under ``section``."""
    return scenario_yaml().replace(f"{section}:\n", f"{section}:\n  {line}\n") if section in GOOD else \
        scenario_yaml() + f"{section}:\n  {line}\n"


def csv_text(gpus: int | str = 8, batch: int | str = 32, rows: int = 1) -> str:
    return "\n".join([CSV_HEADER] + [CSV_ROW.format(i=i, gpus=gpus, batch=batch) for i in range(rows)]) + "\n"


@dataclass
class Case:
    """``files``: name -> text or bytes, written in a fresh folder; ``argv`` may name them as
    ``{name}`` and the folder as ``{dir}``; ``words``: substrings the output must contain."""

    id: str
    argv: list[str]
    status: int = 2
    words: list[str] = field(default_factory=list)
    files: dict[str, str | bytes] = field(default_factory=dict)
    setup: Callable[[Path], None] | None = None
    absent: list[str] = field(default_factory=list)


def _foreign_db(folder: Path) -> None:
    with sqlite3.connect(folder / "other.sqlite") as connection:
        connection.execute("CREATE TABLE invoices (amount REAL)")


def _baseline_db(folder: Path) -> None:
    assert main(["baseline", "add", str(folder / "ok.csv"), "--db", str(folder / "base.sqlite")]) == 0


def _dir(folder: Path) -> None:
    (folder / "adir").mkdir()


def _catalog_with_notes_bomb() -> str:
    entry = yaml.safe_dump({"gpus": [USER_GPU]}).rstrip("\n")
    return entry + "\n  notes: &n\n" + indented(alias_bomb(), 4) + "\n"


CASES = [
    # ---- scenario files: structure -------------------------------------------------------------
    Case("scenario-alias-bomb-check", ["check", "{s.yaml}"], 2, ["s.yaml", "expands to more than"],
         {"s.yaml": scenario_yaml() + "extra: &x\n" + indented(alias_bomb(), 2) + "\n"}),
    Case("scenario-alias-bomb-estimate", ["estimate", "{s.yaml}"], 2, ["s.yaml", "expands to more than"],
         {"s.yaml": "workload:\n  model: &m\n" + indented(alias_bomb(), 4) + "\n"}),
    Case("scenario-alias-bomb-search", ["search", "{s.yaml}"], 2, ["s.yaml", "aliases"],
         {"s.yaml": "plan:\n  tp: &m\n" + indented(alias_bomb(), 4) + "\n"}),
    Case("scenario-megatron-2019-with-pipeline", ["estimate", "{s.yaml}"], 2,
         ["s.yaml", "plan.pp = 4", "'megatron-2019' has no pipeline parallelism", "allowed: 1"],
         {"s.yaml": "workload: {model: gpt3-1.3b}\nhardware: {gpu: V100-SXM3-32GB, num_gpus: 16}\n"
                    "framework: megatron-2019\nplan: {pp: 4}\n"}),
    Case("scenario-megatron-2019-with-flash-attention", ["check", "{s.yaml}"], 2,
         ["s.yaml", "plan.flash_attention = true", "has no FlashAttention", "allowed: false"],
         {"s.yaml": "workload: {model: gpt3-1.3b}\nhardware: {gpu: V100-SXM3-32GB, num_gpus: 16}\n"
                    "framework: megatron-2019\nplan: {flash_attention: true}\n"}),
    Case("scenario-small-alias-is-fine", ["check", "{s.yaml}"], 0, ["valid"],
         {"s.yaml": "hardware: &h {gpu: H100-SXM5-80GB, num_gpus: 8}\nworkload: {model: gpt3-125m}\n"}),
    Case("scenario-deep-block-nesting", ["check", "{s.yaml}"], 2, ["s.yaml", "nested deeper than 32"],
         {"s.yaml": "".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v: 1\n"}),
    Case("scenario-deep-flow-nesting", ["check", "{s.yaml}"], 2, ["s.yaml", "nest"],
         {"s.yaml": "[" * 100_000 + "]" * 100_000}),
    Case("scenario-deep-json", ["check", "{s.json}"], 2, ["s.json", "nested deeper than 32"],
         {"s.json": "[" * 100_000 + "]" * 100_000}),
    Case("scenario-bad-json", ["check", "{s.json}"], 2, ["s.json", "not valid JSON"], {"s.json": '{"workload": '}),
    Case("scenario-bad-yaml", ["check", "{s.yaml}"], 2, ["s.yaml", "not valid YAML"], {"s.yaml": "a: [1, 2\n"}),
    Case("scenario-python-tag", ["check", "{s.yaml}"], 2, ["s.yaml", "not valid YAML"],
         {"s.yaml": "workload: !!python/object/apply:os.system ['true']\n"}),
    Case("scenario-empty", ["check", "{s.yaml}"], 2, ["s.yaml", "mapping"], {"s.yaml": ""}),
    Case("scenario-top-level-list", ["check", "{s.yaml}"], 2, ["s.yaml", "mapping"], {"s.yaml": "- 1\n- 2\n"}),
    Case("scenario-unknown-field", ["check", "{s.yaml}"], 2, ["s.yaml", "plan.colour", "not a field of plan", "allowed here:"],
         {"s.yaml": scenario_yaml(plan={"colour": "red"})}),
    Case("scenario-huge-name", ["check", "{s.yaml}"], 2, ["s.yaml", "workload.model", "at most 200"],
         {"s.yaml": scenario_yaml(workload={"model": "x" * 1_000_000})}),
    Case("scenario-too-big", ["check", "{s.yaml}"], 2, ["s.yaml", "the limit is 33,554,432"],
         {"s.yaml": scenario_yaml() + "#" * (33 * 2**20) + "\n"}),
    # ---- scenario files: numbers ----------------------------------------------------------------
    Case("scenario-micro-batch-1e50", ["check", "{s.yaml}"], 2, ["plan.micro_batch", "65,536", "micro_batch limit"],
         {"s.yaml": scenario_with("plan", "micro_batch: " + "1" + "0" * 50)}),
    Case("scenario-nodes-1e32", ["estimate", "{s.yaml}"], 2, ["hardware.nodes", "1,048,576", "nodes limit"],
         {"s.yaml": scenario_with("hardware", "nodes: " + "1" + "0" * 32)}),
    Case("scenario-num-gpus-1e32", ["estimate", "{s.yaml}"], 2, ["hardware.num_gpus", "1,048,576"],
         {"s.yaml": scenario_yaml(hardware={"num_gpus": 10**32})}),
    Case("scenario-5000-digit-int", ["check", "{s.yaml}"], 2, ["s.yaml"],
         {"s.yaml": scenario_with("plan", "tp: " + "9" * 5000)}),
    Case("scenario-1e9-gpus-check", ["check", "{s.yaml}"], 2, ["hardware.num_gpus", "1000000000", "1,048,576"],
         {"s.yaml": scenario_yaml(hardware={"num_gpus": 10**9})}),
    Case("scenario-1e9-gpus-estimate", ["estimate", "{s.yaml}"], 2, ["hardware.num_gpus", "1,048,576"],
         {"s.yaml": scenario_yaml(hardware={"num_gpus": 10**9})}),
    Case("scenario-1e9-gpus-memory", ["memory", "{s.yaml}"], 2, ["hardware.num_gpus"],
         {"s.yaml": scenario_yaml(hardware={"num_gpus": 10**9})}),
    Case("scenario-1e9-gpus-search", ["search", "{s.yaml}"], 2, ["hardware.num_gpus"],
         {"s.yaml": scenario_yaml(hardware={"num_gpus": 10**9})}),
    Case("scenario-instance-too-many-nodes", ["check", "{s.yaml}"], 2, ["hardware.nodes", "1,048,576"],
         {"s.yaml": yaml.safe_dump({"workload": {"model": "gpt3-125m"},
                                    "hardware": {"instance": "aws/p5.48xlarge", "nodes": 2**21}})}),
    Case("scenario-instance-total-gpus", ["check", "{s.yaml}"], 2, ["GPUs in all", "1,048,576"],
         {"s.yaml": yaml.safe_dump({"workload": {"model": "gpt3-125m"},
                                    "hardware": {"instance": "aws/p5.48xlarge", "nodes": 2**20}})}),
    Case("scenario-tp-true", ["check", "{s.yaml}"], 2, ["plan.tp", "True", "boolean"],
         {"s.yaml": scenario_yaml(plan={"tp": True})}),
    Case("scenario-zero-true", ["check", "{s.yaml}"], 2, ["plan.zero", "boolean"],
         {"s.yaml": scenario_yaml(plan={"zero": True})}),
    Case("scenario-micro-batch-0", ["check", "{s.yaml}"], 2, ["plan.micro_batch", "from 1 to"],
         {"s.yaml": scenario_yaml(plan={"micro_batch": 0})}),
    Case("scenario-layers-negative", ["check", "{s.yaml}"], 2, ["workload.layers", "-1"],
         {"s.yaml": scenario_yaml(workload={"layers": -1})}),
    Case("scenario-global-batch-fraction", ["check", "{s.yaml}"], 2, ["plan.global_batch", "1.5"],
         {"s.yaml": scenario_yaml(plan={"global_batch": 1.5})}),
    Case("scenario-seq-len-2e30", ["check", "{s.yaml}"], 2, ["workload.seq_len", "16,777,216"],
         {"s.yaml": scenario_yaml(workload={"seq_len": 2**30})}),
    Case("scenario-interruptions-inf", ["check", "{s.yaml}"], 2, ["run.interruptions_per_hour", "finite"],
         {"s.yaml": scenario_with("run", "interruptions_per_hour: .inf")}),
    Case("scenario-epochs-nan", ["check", "{s.yaml}"], 2, ["run.epochs", "finite"],
         {"s.yaml": scenario_with("run", "epochs: .nan\n  dataset_samples: 1000")}),
    Case("scenario-unknown-model", ["check", "{s.yaml}"], 2, ["'gpt2'", "not in the zoo"],
         {"s.yaml": scenario_yaml(workload={"model": "gpt2"})}),
    Case("scenario-capacity-factor-on-dense-model", ["check", "{s.yaml}"], 2,
         ["capacity_factor = 1.25", "mixture of experts", "dense"],
         {"s.yaml": scenario_yaml(workload={"capacity_factor": 1.25})}),
    Case("scenario-capacity-factor-boolean", ["check", "{s.yaml}"], 2,
         ["s.yaml", "workload.capacity_factor", "boolean"],
         {"s.yaml": scenario_yaml(workload={"capacity_factor": True})}),
    Case("scenario-multi-node-no-network-check", ["check", "{s.yaml}"], 2, ["hardware.inter", "2 nodes"],
         {"s.yaml": scenario_yaml(hardware={"gpu": "H100-PCIe-80GB", "num_gpus": 16})}),  # no reference fabric
    # ---- scenario files: the file itself ---------------------------------------------------------
    Case("scenario-binary", ["check", "{s.yaml}"], 2, ["s.yaml", "not UTF-8", "byte 0"],
         {"s.yaml": bytes(range(128, 256)) * 4}),
    Case("scenario-endless-device", ["check", "/dev/zero"], 2, ["/dev/zero", "more than 33,554,432 bytes"]),
    Case("scenario-missing", ["check", "{dir}/nope.yaml"], 2, ["nope.yaml", "No such file"]),
    Case("scenario-is-directory", ["estimate", "{dir}/adir"], 2, ["adir", "Is a directory"], setup=_dir),
    Case("scenario-parent-not-directory", ["check", "{s.yaml}/x.yaml"], 2, ["x.yaml", "Not a directory"],
         {"s.yaml": scenario_yaml()}),
    # ---- catalog files ---------------------------------------------------------------------------
    Case("catalog-alias-bomb-in-notes", ["--catalog", "{c.yaml}", "catalog", "list", "gpus"], 2,
         ["c.yaml", "expands to more than"], {"c.yaml": _catalog_with_notes_bomb()}),
    Case("catalog-binary", ["--catalog", "{c.yaml}", "catalog", "list"], 2, ["c.yaml", "not UTF-8"],
         {"c.yaml": b"\xff\xfe\x00gpus: []\x00"}),
    Case("catalog-missing", ["--catalog", "{dir}/none.yaml", "check", EXAMPLE], 2, ["none.yaml", "No such file"]),
    Case("catalog-is-directory", ["--catalog", "{dir}/adir", "catalog", "list"], 2, ["adir", "Is a directory"],
         setup=_dir),
    Case("catalog-deep-nesting", ["--catalog", "{c.yaml}", "catalog", "list"], 2, ["c.yaml", "nested deeper"],
         {"c.yaml": "gpus:\n" + "".join("  " * (i + 1) + f"- k{i}:\n" for i in range(40)) + "  " * 42 + "v\n"}),
    Case("catalog-top-level-list", ["--catalog", "{c.yaml}", "catalog", "list"], 2, ["c.yaml", "mapping"],
         {"c.yaml": "- gpus\n"}),
    Case("catalog-architecture-unknown", ["--catalog", "{c.yaml}", "catalog", "list", "gpus"], 2,
         ["c.yaml", "architecture", "Quantum-Flux", "known: Pascal, Volta", "Hopper"],
         {"c.yaml": yaml.safe_dump({"gpus": [{**USER_GPU, "architecture": "Quantum-Flux"}]})}),
    Case("catalog-architecture-lower-case-is-hopper", ["--catalog", "{c.yaml}", "catalog", "show", "X1000"], 0,
         ["Hopper"], {"c.yaml": yaml.safe_dump({"gpus": [{**USER_GPU, "architecture": "hopper"}]})}),
    Case("catalog-node-gpus-per-node-1e30", ["--catalog", "{c.yaml}", "catalog", "list"], 2,
         ["c.yaml", "gpus_per_node", "1,024"],
         {"c.yaml": yaml.safe_dump({"nodes": [{"name": "n", "gpu": "H100-SXM5-80GB", "gpus_per_node": 10**30,
                                               "intra": "nvlink4", "source": "s"}]})}),
    Case("catalog-sm-count-true", ["--catalog", "{c.yaml}", "catalog", "list"], 2, ["c.yaml", "sm_count"],
         {"c.yaml": yaml.safe_dump({"gpus": [{**USER_GPU, "sm_count": "many"}]})}),
    # ---- measurement CSV files -------------------------------------------------------------------
    Case("csv-num-gpus-1e30", ["validate", "{m.csv}"], 2, ["m.csv:2", "num_gpus", "1e30", "1,048,576"],
         {"m.csv": csv_text(gpus="1e30")}),
    Case("csv-global-batch-nan", ["validate", "{m.csv}"], 2, ["m.csv:2", "global_batch", "not a finite number"],
         {"m.csv": csv_text(batch="nan")}),
    Case("csv-binary", ["validate", "{m.csv}"], 2, ["m.csv", "not a UTF-8 CSV"], {"m.csv": b"id,kind\n\xff\xfe\n"}),
    Case("csv-missing", ["calibrate", "{dir}/none.csv"], 2, ["none.csv", "No such file"]),
    Case("csv-is-directory", ["validate", "{dir}/adir"], 2, ["adir", "Is a directory"], setup=_dir),
    Case("csv-many-bad-rows-listed-short", ["validate", "{m.csv}"], 2, ["10000 problems", "... and 9900 more"],
         {"m.csv": csv_text(gpus=-1, rows=5000)}),
    Case("calibrate-header-only", ["calibrate", "{m.csv}"], 2, ["m.csv", "nothing to fit"], {"m.csv": CSV_HEADER + "\n"}),
    Case("calibrate-no-predictable-row", ["calibrate", "{m.csv}"], 2, ["m.csv", "nothing to fit", "'Z9000'"],
         {"m.csv": csv_text().replace("A100-SXM4-80GB", "Z9000")}),
    Case("calibrate-cv-50-on-1-row", ["calibrate", "{m.csv}", "--cv", "50"], 2, ["--cv 50", "from 2 to 1"],
         {"m.csv": csv_text()}),
    Case("calibrate-cv-1", ["calibrate", "{m.csv}", "--cv", "1"], 2, ["--cv 1", "from 2"], {"m.csv": csv_text()}),
    Case("calibrate-cv-nan", ["calibrate", "{m.csv}", "--cv", "nan"], 2, ["--cv", "'nan'", "whole number"],
         {"m.csv": csv_text()}),
    Case("calibrate-seed-negative", ["calibrate", "{m.csv}", "--seed", "-1"], 2, ["--seed", "-1", "4,294,967,295"],
         {"m.csv": csv_text()}),
    Case("calibrate-save-cv-without-cv", ["calibrate", "{m.csv}", "--save-cv", "{dir}"], 2, ["--save-cv", "needs --cv"],
         {"m.csv": csv_text()}),
    Case("calibrate-save-cv-missing-dir", ["calibrate", "{m.csv}", "--cv", "2", "--save-cv", "{dir}/no/such"], 2,
         ["held_out.csv.gz", "does not exist"], {"m.csv": csv_text()}),
    Case("calibrate-output-is-directory", ["calibrate", "{m.csv}", "-o", "{dir}/adir"], 2,
         ["adir", "is a directory"], {"m.csv": csv_text()}, setup=_dir),
    Case("calibrate-output-missing-parent", ["calibrate", "{m.csv}", "-o", "{dir}/no/such/p.yaml"], 2,
         ["p.yaml", "does not exist"], {"m.csv": csv_text()}),
    Case("calibrate-output-parent-is-file", ["calibrate", "{m.csv}", "-o", "{m.csv}/p.yaml"], 2,
         ["p.yaml", "not a directory"], {"m.csv": csv_text()}),
    # ---- calibration profiles --------------------------------------------------------------------
    Case("profile-alias-bomb", ["memory", EXAMPLE, "--calibration", "{p.yaml}"], 2, ["p.yaml", "expands to more than"],
         {"p.yaml": "values: &v\n" + indented(alias_bomb(), 2) + "\n"}),
    Case("profile-binary", ["search", EXAMPLE, "--calibration", "{p.yaml}"], 2, ["p.yaml", "not UTF-8"],
         {"p.yaml": b"\x89PNG\r\n\x1a\n\x00\x00"}),
    Case("profile-missing", ["validate", "--calibration", "{dir}/none.yaml"], 2, ["none.yaml", "No such file"]),
    Case("workloads-file-alias-bomb", ["workload", "show", "w", "--models", "{w.yaml}"], 2,
         ["w.yaml", "expands to more than"], {"w.yaml": "workloads: &w\n" + indented(alias_bomb(), 2) + "\n"}),
    Case("workloads-file-layers-1e50", ["workload", "show", "w", "--models", "{w.yaml}"], 2,
         ["w.yaml", "layers", "10,000"],
         {"w.yaml": yaml.safe_dump({"workloads": [{"name": "w", "transformer": {
             "layers": 10**50, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 50000}}]})}),
    # ---- numeric flags ---------------------------------------------------------------------------
    Case("comm-gpus-per-node-0", ["comm", "--gpu", "H100-SXM5-80GB", "--gpus-per-node", "0"], 2,
         ["--gpus-per-node", "0", "from 1 to 1,024"]),
    Case("comm-nodes-1e20", ["comm", "--gpu", "H100-SXM5-80GB", "--nodes", "1" + "0" * 20], 2,
         ["--nodes", "1,048,576"]),
    Case("comm-nodes-nan", ["comm", "--gpu", "H100-SXM5-80GB", "--nodes", "nan"], 2, ["--nodes", "'nan'"]),
    Case("comm-group-size-negative", ["comm", "--gpu", "H100-SXM5-80GB", "--group-size", "-4"], 2,
         ["--group-size", "-4"]),
    Case("comm-sizes-inf", ["comm", "--gpu", "H100-SXM5-80GB", "--sizes", "1KiB..inf"], 2, ["inf"]),
    Case("comm-sizes-beyond-limit", ["comm", "--gpu", "H100-SXM5-80GB", "--sizes", "1KiB..1000PB"], 2,
         ["--sizes", "1 PiB"]),
    Case("roofline-micro-batch-1e23", ["roofline", "--gpu", "H100-SXM5-80GB", "--model", "gpt3-125m",
                                       "--micro-batch", "1e23"], 2, ["--micro-batch", "'1e23'", "whole number"]),
    Case("roofline-micro-batch-10-23", ["roofline", "--gpu", "H100-SXM5-80GB", "--model", "gpt3-125m",
                                        "--micro-batch", "1" + "0" * 23], 2, ["--micro-batch", "65,536"]),
    Case("search-top-0", ["search", EXAMPLE, "--top", "0"], 2, ["--top", "0"]),
    Case("validate-top-negative", ["validate", "--top", "-1"], 2, ["--top", "-1"]),
    Case("scaling-gpus-nan", ["scaling", EXAMPLE, "--gpus", "8,nan"], 2, ["--gpus", "8,nan"]),
    Case("scaling-gpus-1e20", ["scaling", EXAMPLE, "--gpus", "8,1" + "0" * 20], 2, ["num_gpus", "1,048,576"]),
    Case("baseline-threshold-nan", ["baseline", "compare", "{ok.csv}", "--db", "{dir}/b.sqlite", "--threshold", "nan"],
         2, ["threshold", "'nan'"], {"ok.csv": csv_text()}),
    Case("comm-output-missing-parent", ["comm", "--gpu", "H100-SXM5-80GB", "-o", "{dir}/no/busbw.png"], 2,
         ["busbw.png", "does not exist"]),
    Case("roofline-framework-unknown", ["roofline", "--gpu", "H100-SXM5-80GB", "--model", "gpt3-125m",
                                        "--framework", "keras"], 2, ["--framework", "'keras'", "megatron"]),
    Case("roofline-output-is-directory", ["roofline", "--gpu", "H100-SXM5-80GB", "--model", "gpt3-125m",
                                          "-o", "{dir}/adir"], 2, ["adir", "is a directory"], setup=_dir),
    Case("scaling-output-parent-is-file", ["scaling", EXAMPLE, "--gpus", "8", "-o", "{ok.csv}/s.png"], 2,
         ["s.png", "not a directory"], {"ok.csv": csv_text()}),
    # ---- baseline databases ----------------------------------------------------------------------
    Case("db-parent-is-file", ["baseline", "add", "{ok.csv}", "--db", "{ok.csv}/sub/x"], 2,
         ["sub/x", "Not a directory"], {"ok.csv": csv_text()}),
    Case("db-url-no-scheme", ["baseline", "list", "--db", "://"], 2, ["'://'", "not a database URL", "postgresql"]),
    Case("db-url-ftp", ["baseline", "list", "--db", "ftp://host/x"], 2, ["'ftp'", "supported", "sqlite", "postgresql"]),
    Case("db-foreign-sqlite", ["baseline", "add", "{ok.csv}", "--db", "{dir}/other.sqlite"], 2,
         ["other.sqlite", "not a perfmodel baseline database", "invoices"], {"ok.csv": csv_text()}, _foreign_db),
    Case("db-not-a-database", ["baseline", "list", "--db", "{t.db}"], 2, ["t.db", "file is not a database"],
         {"t.db": "hello, I am a text file\n" * 100}),
    Case("db-is-directory", ["baseline", "list", "--db", "{dir}/adir"], 2, ["adir", "directory"], setup=_dir),
    Case("db-read-only", ["baseline", "add", "{ok.csv}", "--db", "sqlite:///file:{dir}/base.sqlite?mode=ro&uri=true"],
         2, ["cannot write to baseline database", "readonly"], {"ok.csv": csv_text(rows=50)}, _baseline_db,
         absent=["INSERT", "parameters", "sqlalche.me"]),
    # ---- valid input: an answer, exit 0 ----------------------------------------------------------
    Case("valid-check", ["check", EXAMPLE], 0, ["valid", "V100-SXM2-16GB"]),
    Case("valid-memory", ["memory", EXAMPLE], 0, ["fits"]),
    Case("valid-search", ["search", EXAMPLE, "--top", "1"], 0, ["candidate plans"]),
    Case("valid-baseline-add", ["baseline", "add", "{ok.csv}", "--db", "{dir}/new/b.sqlite"], 0, ["added 1 rows"],
         {"ok.csv": csv_text()}),
    # ---- valid input, nothing feasible: exit 3 with the reasons ----------------------------------
    Case("search-no-valid-plan", ["search", "{s.yaml}"], 3, ["dropped", "does not divide the global batch",
                                                             "no plan is valid"],
         {"s.yaml": scenario_yaml(plan={"micro_batch": 3, "global_batch": 7})}, absent=["not in index"]),
    Case("search-no-valid-plan-json", ["search", "{s.yaml}", "--json"], 3, ['"feasible": 0'],
         {"s.yaml": scenario_yaml(plan={"micro_batch": 3, "global_batch": 7})}),
    Case("search-nothing-fits", ["search", "{s.yaml}"], 3, ["does not fit in GPU memory"],
         {"s.yaml": yaml.safe_dump({"workload": {"model": "llama2-70b"}, "hardware": {"gpu": "T4", "num_gpus": 1}})}),
    Case("memory-does-not-fit", ["memory", "{s.yaml}"], 3, ["DOES NOT FIT", "exceeds"],
         {"s.yaml": yaml.safe_dump({"workload": {"model": "llama2-70b"}, "hardware": {"gpu": "T4", "num_gpus": 1}})}),
    Case("memory-invalid-plan", ["memory", "{s.yaml}"], 3, ["tp*pp*cp*dp"],
         {"s.yaml": scenario_yaml(plan={"tp": 3})}),
]


def _materialize(case: Case, folder: Path) -> list[str]:
    for name, content in case.files.items():
        path = folder / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    if case.setup:
        case.setup(folder)
    names = {"dir": str(folder), **{name: str(folder / name) for name in case.files}}
    argv = []
    for arg in case.argv:
        for name, path in names.items():
            arg = arg.replace("{" + name + "}", path)
        argv.append(arg)
    return argv


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_one_clear_error(case: Case, tmp_path, capsys):
    argv = _materialize(case, tmp_path)
    capsys.readouterr()  # what a setup step printed
    start = time.perf_counter()
    status = main(argv)
    elapsed = time.perf_counter() - start
    out, err = capsys.readouterr()
    text = out + err
    assert "Traceback" not in text
    assert status == case.status, text[-2000:]
    for word in case.words:
        assert word in text, f"{word!r} not in:\n{text[-2000:]}"
    for word in case.absent:
        assert word not in text
    if case.status == 2:
        assert out == ""
        assert len(err) < MAX_MESSAGE_CHARS, err[:500]
    assert elapsed < SECONDS


def test_battery_is_large():
    assert len(CASES) >= 60
    assert len({case.id for case in CASES}) == len(CASES)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))


@pytest.mark.parametrize("case", [c for c in CASES if "alias-bomb" in c.id], ids=lambda c: c.id)
def test_alias_bombs_stay_within_1_gib_and_15_s(case: Case, tmp_path):
    argv = _materialize(case, tmp_path)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "import sys; from perfmodel.cli import main; sys.exit(main(sys.argv[1:]))",
                           *argv], capture_output=True, text=True, timeout=60, preexec_fn=_limit_memory,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert time.perf_counter() - start < 15
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "expands to more than" in done.stderr
