"""Cross-validated residuals for the prediction intervals, and the coverage section of docs/accuracy.md.

    python scripts/interval_report.py compute --kind kfold --cache build/intervals   # 5-fold, folds of experiments
    python scripts/interval_report.py compute --kind source --cache build/intervals  # 5-fold, folds of sources
    python scripts/interval_report.py compute --kind gpu --cache build/intervals     # leave-one-GPU-out (GEMM rows)
    python scripts/interval_report.py compute --kind architecture --cache build/intervals  # leave-one-architecture-out
    python scripts/interval_report.py report --cache build/intervals [--write docs/accuracy.md]

``compute`` writes ``<cache>/<kind>.csv`` (the held-out validate() frame; ``gpu`` also
``gpu_kfold.csv``, the GEMM k-fold it is compared with: ~15 min on a busy 2-core machine).
``--only train,collective`` restricts ``kfold``/``source``/``architecture`` to those kinds' rows,
with the kernel-stage values (fitted on GEMM and copy rows only, none of these rows) taken from
the shipped profile, so no fold pays for the GEMM fit (the whole-train-stage refit per fold
remains: ~5 min per fold on one core).  ``--jobs N`` fits the folds in N processes.  ``report`` scores every cache present
(each held-out row bounded by an interval model fitted without its fold) and prints, or replaces
in ``--write``, the markdown section.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def kernel_start_profile():
    """The shipped profile's kernel-stage values only: the starting point (and prior centres) of a
    fit on train and collective rows that should not refit the GEMM kernel model.  Nothing fitted
    to train or collective rows is kept, so a fold's priors never saw its held-out rows."""
    from perfmodel.calibration.fit import STAGES
    from perfmodel.profile import CalibrationProfile, default_profile, split_key

    kernel = next(names for stage, _, names in STAGES if stage == "kernel")
    shipped = default_profile()
    keep = {key for key in shipped.values if split_key(key)[0] in kernel}
    return CalibrationProfile(values={k: shipped.values[k] for k in keep},
                              uncertainty={k: v for k, v in shipped.uncertainty.items() if k in keep})


def compute(kind: str, cache: Path, only=None, jobs: int = 1) -> None:
    from perfmodel.calibration.coverage import leave_gpu_out, leave_group_out
    from perfmodel.calibration.fit import cross_validate
    from perfmodel.calibration.intervals import architectures
    from perfmodel.calibration.measurements import shipped_measurements
    from perfmodel.hardware.catalog import load_catalog

    import pandas as pd

    catalog = load_catalog()
    measurements = shipped_measurements()
    start_profile = None
    if only and kind != "gpu":  # the GPU study is of GEMM rows whatever --only says
        measurements = measurements[measurements["kind"].isin(only)]
        start_profile = kernel_start_profile()
    start = time.time()
    if kind in ("kfold", "source"):
        frame = cross_validate(measurements, k=5, seed=0, catalog=catalog, jobs=jobs, profile=start_profile,
                               by="experiment" if kind == "kfold" else "source")
    elif kind == "gpu":
        # leave-one-GPU-out on GEMM rows, and the experiment k-fold of the same stage it is compared with
        frame = leave_gpu_out(measurements, catalog=catalog)
        kernel_rows = measurements[measurements["kind"].isin(["gemm", "memcpy"])]
        cache.mkdir(parents=True, exist_ok=True)
        cross_validate(kernel_rows, k=5, seed=0, catalog=catalog, jobs=jobs, by="experiment").to_csv(
            cache / "gpu_kfold.csv")
    else:
        # architectures with >= 20 rows: a fold for the 1-row ones would cost a full fit for one row
        arch = pd.Series(architectures(measurements["gpu"], catalog), index=measurements.index)
        counts = arch.value_counts()
        frame = leave_group_out(measurements, arch.where(arch.map(counts) >= 20, None), catalog=catalog,
                                profile=start_profile)
    cache.mkdir(parents=True, exist_ok=True)
    frame.to_csv(cache / f"{kind}.csv")
    print(f"{kind}: {len(frame)} rows in {time.time() - start:.0f} s -> {cache / f'{kind}.csv'}")


START, END = "<!-- interval-report:start -->", "<!-- interval-report:end -->"
LEVEL_COLUMNS = ["n", "coverage_50", "coverage_80", "coverage_95", "width_50", "width_80", "width_95"]


def markdown(frame, key: str, min_rows: int = 1) -> str:
    frame = frame[(frame["n"] >= min_rows) | (frame[key] == "all")]
    columns = [key] + LEVEL_COLUMNS
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for _, row in frame.iterrows():
        name = str(row[key])
        cells = [name if len(name) <= 70 else name[:67] + "...", str(int(row["n"]))]
        cells += ["-" if row[c] != row[c] else f"{row[c]:.2f}" for c in LEVEL_COLUMNS[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table_markdown(frame) -> str:
    """A frame as a markdown table: integers as they are, other numbers to two decimals."""
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    for _, row in frame.iterrows():
        cells = [str(v) if isinstance(v, (str, int)) else ("-" if v != v else f"{v:.2f}") for v in row.tolist()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _read(path: Path):
    import pandas as pd

    frame = pd.read_csv(path, index_col=0)
    return frame[frame["predicted"].notna() & frame["measured"].notna()]


def per_source(scored):
    """Per kind: ``sources`` and the mean over them of each source's coverage_50/80/95 and median
    width_80 (every source weighs one, whatever its rows)."""
    import pandas as pd

    from perfmodel.calibration.coverage import coverage_table

    table = coverage_table(scored, ["kind", "source"])
    table = table[(table["kind"] != "all") & (table["source"] != "all")]
    columns = ["coverage_50", "coverage_80", "coverage_95", "width_80"]
    rows = [{"kind": kind, "sources": len(part), **part[columns].mean().to_dict()}
            for kind, part in table.groupby("kind", sort=True)]
    return pd.DataFrame(rows, columns=["kind", "sources", *columns])


def report(cache: Path, write: Path | None) -> int:
    import pandas as pd

    from perfmodel.calibration.coverage import coverage_table, group_out_intervals, held_out_intervals
    from perfmodel.calibration.intervals import row_context
    from perfmodel.calibration.measurements import shipped_measurements
    from perfmodel.hardware.catalog import load_catalog
    from perfmodel.profile import default_profile

    catalog = load_catalog()
    measurements = shipped_measurements()
    context = row_context(measurements, catalog)
    profile = default_profile()
    out = [START, "## Prediction intervals: coverage out of sample",
           "",
           "Generated by `scripts/interval_report.py report` (see its docstring for the `compute` commands). "
           "Every row is predicted by parameters fitted without it and bounded by an interval model "
           "(`perfmodel.calibration.intervals`) fitted without its fold, so every number below is out of sample. "
           "coverage_L = share of measured values inside the L % interval (honest: close to L/100); "
           "width_L = median high/low of that interval.",
           ""]
    studies = []
    kfold_path, source_path = cache / "kfold.csv", cache / "source.csv"
    if kfold_path.exists():
        kfold = _read(kfold_path)
        studies.append(("5-fold, folds of experiments (another row of a source already fitted)",
                        held_out_intervals(kfold, context, profile)))
    if source_path.exists():
        by_source = _read(source_path)
        studies.append(("5-fold, folds of sources (train and collective rows: a source never fitted; "
                        "the case of every user's run)", held_out_intervals(by_source, context, profile)))
    gpu_path, gpu_kfold_path = cache / "gpu.csv", cache / "gpu_kfold.csv"
    if gpu_path.exists() and gpu_kfold_path.exists():
        unseen, base = _read(gpu_path), _read(gpu_kfold_path)
        held = group_out_intervals(unseen, base, context, profile, "gpu", calibrate_unseen=True)
        studies.append(("leave one GPU out (GEMM rows; kernel-stage refit without the GPU; its rows bounded by a "
                        "model fitted on the other GPUs' 5-fold residuals with the GPU-model term learnt from the "
                        "other GPUs' leave-one-out rows)", held))
    arch_path = cache / "architecture.csv"
    base_path = kfold_path if kfold_path.exists() else source_path
    if arch_path.exists() and base_path.exists():
        unseen = _read(arch_path)
        unseen = unseen[unseen["fold"].notna()]
        held = group_out_intervals(unseen, _read(base_path), context, profile, "architecture", calibrate_unseen=True)
        studies.append(("leave one architecture out (each architecture with >= 20 rows; parameters refitted and "
                        "the architecture's values removed; new-architecture term learnt from the other held-out "
                        "architectures)", held))
    for title, scored in studies:
        out += [f"### {title[0].upper() + title[1:]}", "", markdown(coverage_table(scored, "kind"), "kind"), ""]
        if "folds of sources" in title:
            out += ["Each source weighing one (the mean over a kind's sources of the share of each source's rows "
                    "inside its interval; a user's run, like each held-back set, is one new source):", "",
                    table_markdown(per_source(scored.join(context[["source"]]))), ""]
            scored = scored.join(context[["architecture", "family"]])
            out += ["By architecture (same study):", "", markdown(coverage_table(scored, "architecture"),
                                                                   "architecture"), ""]
            train = scored[scored["kind"] == "train"]
            train = train.assign(group=train["architecture"].fillna("?") + " / " + train["family"].fillna("?"))
            out += ["Training rows by architecture and workload family (same study):", "",
                    markdown(coverage_table(train, "group"), "group"), ""]
        if title.startswith("leave one GPU out"):
            out += ["By held-out GPU:", "", markdown(coverage_table(scored, "gpu"), "gpu"), ""]
    if not studies:
        raise SystemExit(f"no cached study in {cache}: run `interval_report.py compute` first")
    out.append(END)
    section = "\n".join(out)
    if write is None:
        print(section)
        return 0
    text = write.read_text(encoding="utf-8") if write.exists() else ""
    if START in text and END in text:
        text = text[:text.index(START)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    write.write_text(text, encoding="utf-8")
    print(f"wrote the interval section of {write}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["compute", "report"])
    parser.add_argument("--kind", choices=["kfold", "source", "gpu", "architecture"], default="kfold")
    parser.add_argument("--only", help="comma-separated measurement kinds to cross-validate (e.g. train,collective)")
    parser.add_argument("--jobs", type=int, default=1, help="processes for the folds (default 1)")
    parser.add_argument("--cache", type=Path, default=Path("build/intervals"))
    parser.add_argument("--write", type=Path, help="replace the interval section of this markdown file")
    args = parser.parse_args(argv)
    if args.action == "compute":
        compute(args.kind, args.cache, args.only.split(",") if args.only else None, args.jobs)
        return 0
    return report(args.cache, args.write)


if __name__ == "__main__":
    sys.exit(main())
