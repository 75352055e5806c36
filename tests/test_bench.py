"""The PyTorch measurement harness on CPU at tiny sizes (skipped without PyTorch), and the rule
that nothing else in perfmodel imports it."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from perfmodel.calibration.measurements import load_measurements


def test_library_never_imports_bench():
    code = ("import sys, perfmodel, perfmodel.baseline, perfmodel.cli.baseline, "
            "perfmodel.calibration.validate, perfmodel.calibration.measurements; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('perfmodel.bench')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.fixture(scope="module")
def quick_rows(tmp_path_factory):
    pytest.importorskip("torch")
    from perfmodel.bench.__main__ import main

    out = tmp_path_factory.mktemp("bench") / "cpu.csv"
    assert main(["--out", str(out), "--quick", "--device", "cpu"]) == 0
    return load_measurements(out)


def test_quick_cpu_run_writes_loadable_rows_of_every_kind(quick_rows):
    assert set(quick_rows["kind"]) == {"gemm", "memcpy", "collective", "train"}
    assert (quick_rows["value"] > 0).all()
    assert set(quick_rows["gpu"]) == {"cpu"}
    assert quick_rows["id"].is_unique


def test_rows_carry_provenance_without_host_name(quick_rows):
    import torch

    host = socket.gethostname()
    for text in list(quick_rows["source"]) + list(quick_rows["notes"]):
        assert host not in text
    assert all(f"torch {torch.__version__}" in source for source in quick_rows["source"])
    assert all("median of" in note for note in quick_rows["notes"])


def test_rows_describe_what_was_measured(quick_rows):
    from perfmodel.bench import gemm, layer, memcpy

    rows = quick_rows.set_index("kind")
    m, n, k = gemm.CPU_QUICK_SHAPES[0]
    assert tuple(rows.loc[["gemm"], ["m", "n", "k"]].iloc[0]) == (m, n, k)
    assert rows.loc["memcpy", "bytes"] == memcpy.CPU_QUICK_SIZES[0]
    train = rows.loc["train"]
    hidden, heads, seq_len, micro_batch, vocab, precision = layer.CPU_QUICK_SHAPES[0]
    assert (train["model"], train["layers"], train["hidden"], train["heads"], train["seq_len"],
            train["vocab"], train["micro_batch"], train["precision"], train["metric"]) == (
        "transformer", 1, hidden, heads, seq_len, vocab, micro_batch, precision, "step_time_s")
    collective = rows.loc["collective"]
    assert (collective["collective"], collective["num_gpus"], collective["metric"]) == (
        "all_reduce", 1, "time_us")


def test_rates_follow_the_format_conventions(monkeypatch):
    """tflops = 2mnk / t; memcpy GBps counts bytes read plus bytes written; all-reduce in us."""
    pytest.importorskip("torch")
    from perfmodel.bench import gemm, make_context, memcpy

    ctx = make_context("cpu", quick=True)
    for module in (gemm, memcpy):
        monkeypatch.setattr(module, "measure", lambda ctx, function: (function(), 2e-3)[1])
    assert gemm.gemm(ctx, 64, 32, 16, "fp32")["value"] == pytest.approx(2 * 64 * 32 * 16 / 2e-3 / 1e12)
    assert memcpy.memcpy(ctx, 2**20)["value"] == pytest.approx(2 * 2**20 / 2e-3 / 1e9)
    with pytest.raises(ValueError, match="'int4'"):
        gemm.gemm(ctx, 8, 8, 8, "int4")


def test_unknown_benchmark_is_refused(tmp_path, capsys):
    pytest.importorskip("torch")
    from perfmodel.bench.__main__ import main

    assert main(["--out", str(tmp_path / "x.csv"), "--only", "gemm,fft", "--device", "cpu"]) == 2
    assert "'fft'" in capsys.readouterr().err
