"""Cross-validated residuals for the prediction intervals, and the coverage section of docs/accuracy.md.

    python scripts/interval_report.py compute --kind kfold --cache build/intervals   # 5-fold CV (~15 min)
    python scripts/interval_report.py compute --kind architecture --cache build/intervals  # leave-one-architecture-out
    python scripts/interval_report.py compute --kind source --cache build/intervals  # sources in 5 folds
    python scripts/interval_report.py report --cache build/intervals [--write docs/accuracy.md]

``compute`` writes ``<cache>/<kind>.csv`` (the held-out validate() frame); ``report`` fits the
interval model on the k-fold frame and prints (or replaces in ``--write``) the markdown section.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def source_folds(sources, k: int = 5, seed: int = 0):
    """Fold label ('sources-0' .. 'sources-4') of each row: its source, assigned at random."""
    import numpy as np

    names = sorted(set(sources.dropna()))
    order = np.random.default_rng(seed).permutation(len(names))
    fold = {name: f"sources-{order[i] % k}" for i, name in enumerate(names)}
    return sources.map(fold)


def compute(kind: str, cache: Path) -> None:
    from perfmodel.calibration.coverage import leave_group_out
    from perfmodel.calibration.fit import cross_validate
    from perfmodel.calibration.intervals import architectures
    from perfmodel.calibration.measurements import shipped_measurements
    from perfmodel.hardware.catalog import load_catalog

    import pandas as pd

    catalog = load_catalog()
    measurements = shipped_measurements()
    start = time.time()
    if kind == "kfold":
        frame = cross_validate(measurements, k=5, seed=0, catalog=catalog)
    elif kind == "architecture":
        # architectures with >= 20 rows: a fold for the 1-row ones would cost a full fit for one row
        arch = pd.Series(architectures(measurements["gpu"], catalog), index=measurements.index)
        counts = arch.value_counts()
        frame = leave_group_out(measurements, arch.where(arch.map(counts) >= 20, None), catalog=catalog)
    else:  # sources in 5 folds: every row predicted by a fit that saw none of its source's rows
        frame = leave_group_out(measurements, source_folds(measurements["source"]), catalog=catalog)
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


def legacy_bounds(frame, fitted, context):
    """The former method for comparison: the 10th/90th percentiles of the fitted rows' ratios
    per kind[architecture] (>= 8 rows) else per kind, fitted on ``fitted`` only."""
    import numpy as np

    from perfmodel.calibration.intervals import bounds, rate_ratio

    ok = fitted[fitted["predicted"].notna()]
    ratio = rate_ratio(ok["metric"], ok["measured"].to_numpy(float), ok["predicted"].to_numpy(float))
    arch = context.loc[ok.index, "architecture"].to_numpy(dtype=object)
    low = np.full(len(frame), np.nan)
    high = np.full(len(frame), np.nan)
    for i, (kind, a) in enumerate(zip(frame["kind"], context.loc[frame.index, "architecture"])):
        mine = (ok["kind"].to_numpy() == kind) & (arch == a)
        if mine.sum() < 8:
            mine = ok["kind"].to_numpy() == kind
        if mine.sum() >= 2:
            low[i], high[i] = np.quantile(ratio[mine], (0.1, 0.9))
    return bounds(frame["metric"].to_numpy(dtype=object), frame["predicted"].to_numpy(float), low, high)


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
    kfold = pd.read_csv(cache / "kfold.csv", index_col=0)
    kfold = kfold[kfold["predicted"].notna()]
    scored = held_out_intervals(kfold, context, profile).join(context[["architecture", "framework", "source"]])
    out = [START, "## Prediction intervals: coverage out of sample",
           "",
           "Generated by `scripts/interval_report.py report` from the 5-fold cross-validated residuals of the "
           "shipped measurements (`interval_report.py compute --kind kfold`). Each fold's rows are bounded by an "
           "interval model (`perfmodel.calibration.intervals`) fitted on the *other* folds' residuals, so every "
           "number below is out of sample. coverage_L = share of measured values inside the L % interval "
           "(honest: close to L/100); width_L = median high/low of that interval.",
           ""]
    for key in ("kind", "architecture", "framework"):
        out += [f"### By {key} (5-fold)", "", markdown(coverage_table(scored, key), key), ""]
    sources = coverage_table(scored, "source")
    big = sources[(sources["n"] >= 20) & (sources["source"] != "all")]
    inside = ((big["coverage_80"] >= 0.7) & (big["coverage_80"] <= 0.9)).sum()
    out += ["### By source (5-fold, sources with >= 20 rows)", "",
            f"{inside} of {len(big)} such sources have 80 % coverage within 0.70-0.90.", "",
            markdown(sources, "source", min_rows=20), ""]
    legacy = kfold.copy()
    legacy["low"], legacy["high"] = legacy_bounds(kfold, kfold, context)
    old = coverage_table(legacy, "kind")
    out += ["For comparison, the former per-kind[architecture] 10-90 % band, in sample on the same rows: "
            + ", ".join(f"{r['kind']} {r['coverage_80']:.2f} (width {r['width_80']:.2f})" for _, r in old.iterrows()),
            ""]
    unseen_path = cache / "architecture.csv"
    if unseen_path.exists():
        unseen = pd.read_csv(unseen_path, index_col=0)
        unseen = unseen[unseen["predicted"].notna() & unseen["fold"].notna()]
        held = group_out_intervals(unseen, kfold, context, profile, "architecture")
        held["group"] = held["fold"] + " / " + held["kind"]
        learnt = group_out_intervals(unseen, kfold, context, profile, "architecture", calibrate_unseen=True)
        learnt["group"] = learnt["fold"] + " / " + learnt["kind"]
        former = unseen.copy()
        former["low"] = former["high"] = float("nan")
        for arch in unseen["fold"].unique():
            rows = unseen["fold"] == arch
            others = kfold[(context.loc[kfold.index, "architecture"] != arch).to_numpy()]
            former.loc[rows, "low"], former.loc[rows, "high"] = legacy_bounds(unseen[rows], others, context)
        former["group"] = former["fold"] + " / " + former["kind"]
        old = coverage_table(former, "group").set_index("group")
        table = coverage_table(held, "group")
        table["former_80"] = table["group"].map(old["coverage_80"])
        learnt = coverage_table(learnt, "group").set_index("group")
        table["learnt_80"] = table["group"].map(learnt["coverage_80"])
        table["learnt_width_80"] = table["group"].map(learnt["width_80"])
        out += ["### Leave one GPU architecture out", "",
                "Each architecture with >= 20 rows (Ampere, Blackwell, Hopper, Volta) is held out in turn: the "
                "parameters are refitted without its rows (`interval_report.py compute --kind architecture`, "
                "`perfmodel.calibration.coverage.leave_group_out`) and its rows are bounded by an interval model "
                "fitted without them and with that architecture's parameter values removed (pooled values, as for a "
                "GPU never measured). former_80: coverage of the former kind-level 10-90 % band on the same rows. "
                "learnt_80 / learnt_width_80: the same when the new-architecture term is also learnt from the "
                "*other* held-out architectures' rows (`fit_interval_model(..., unseen=...)`).",
                "",
                markdown(table, "group").replace("| group |", "| held-out architecture / kind |"), ""]
        lines = out[-2].split("\n")
        extra = ["former_80", "learnt_80", "learnt_width_80"]
        lines[0] += " " + " | ".join(extra) + " |"
        lines[1] += "---|" * len(extra)
        for i, (_, row) in enumerate(table.iterrows()):
            lines[i + 2] += "".join(f" {row[c]:.2f} |" if row[c] == row[c] else " - |" for c in extra)
        out[-2] = "\n".join(lines)
    sources_path = cache / "source.csv"
    if sources_path.exists():
        by_source = pd.read_csv(sources_path, index_col=0)
        by_source = by_source[by_source["predicted"].notna() & by_source["fold"].notna()]
        context["source_fold"] = source_folds(measurements["source"])
        held = group_out_intervals(by_source, kfold, context, profile, "source_fold")
        out += ["### Leave sources out (sources in 5 folds)", "",
                "Every row is predicted by parameters fitted without any row of its source, and bounded by an "
                "interval model fitted without them.", "", markdown(coverage_table(held, "kind"), "kind"), ""]
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
    parser.add_argument("--kind", choices=["kfold", "architecture", "source"], default="kfold")
    parser.add_argument("--cache", type=Path, default=Path("build/intervals"))
    parser.add_argument("--write", type=Path, help="replace the interval section of this markdown file")
    args = parser.parse_args(argv)
    if args.action == "compute":
        compute(args.kind, args.cache)
        return 0
    return report(args.cache, args.write)


if __name__ == "__main__":
    sys.exit(main())
