"""Draw the README gallery into docs/gallery/ from the public API (run from the repo root):

    .venv/bin/python scripts/make_gallery.py

Every figure comes from the shipped examples, catalog and measurements; nothing is hand-made.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from perfmodel import load_catalog, load_scenario, plots  # noqa: E402
from perfmodel.calibration.measurements import shipped_measurements  # noqa: E402
from perfmodel.calibration.validate import validate  # noqa: E402
from perfmodel import estimate  # noqa: E402
from perfmodel.models.comm import sweep  # noqa: E402
from perfmodel.models.compute import roofline_points  # noqa: E402
from perfmodel.profile import default_profile  # noqa: E402
from perfmodel import rank  # noqa: E402
from perfmodel import scaling  # noqa: E402
from perfmodel.workloads import get_workload  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ["resnet50-8xa100", "bert-large-8xv100", "llama2-7b-p5", "gpt3-175b-1024xa100"]


def figures():
    """(file stem, Figure) for each gallery image."""
    catalog = load_catalog(include_env=False)
    estimates = [estimate(ROOT / "examples" / f"{name}.yaml", catalog) for name in EXAMPLES]
    yield "breakdown", plots.breakdown(estimates, labels=EXAMPLES, relative=True)
    yield "memory", plots.memory(estimates, labels=EXAMPLES)

    gpu = catalog.gpu("H100-SXM5-80GB")
    points = roofline_points(get_workload("gpt3-1.3b"), gpu, "bf16", default_profile(), 4)
    yield "roofline", plots.roofline(gpu, points, ["fp8", "bf16", "fp32"], workload="gpt3-1.3b")

    vit = {"workload": {"model": "vit-b16"}, "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8,
           "gpus_per_node": 8, "intra": "nvlink3", "inter": "4 x ib-hdr"},
           "plan": {"precision": "bf16", "global_batch": 1024, "tp": 1, "pp": 1}}
    counts = [1, 2, 4, 8, 16, 32, 64]
    strong = scaling(vit, counts, "strong", catalog)
    weak = scaling({**vit, "plan": {**vit["plan"], "global_batch": 128}}, counts, "weak", catalog)
    yield "scaling", plots.scaling_plot([strong, weak], title="ViT-B/16 on A100-SXM4-80GB (8 per node, 4 x HDR)")

    cluster = catalog.cluster(gpu="H100-SXM5-80GB", num_gpus=16, gpus_per_node=8, intra="nvlink4",
                              inter="8 x ib-ndr")
    yield "busbw", plots.busbw_figure(sweep(cluster), title="all-reduce, 2 x 8 H100 SXM, 8 x NDR per node")

    job = load_scenario(ROOT / "examples" / "llama2-7b-p5.yaml").model_copy(
        update={"run": None}).model_dump(exclude_none=True)
    job["run"] = {"train_tokens": 2e11}
    ranking = rank(job, catalog, instances=["aws/p4d.24xlarge", "aws/p5.48xlarge", "aws/p4de.24xlarge"],
                   nodes=[1, 2, 4, 8], pricing=["on_demand", "spot"])
    yield "pareto", plots.pareto(ranking)

    yield "prediction_error", plots.prediction_error(validate(shipped_measurements(), catalog))


def main(out: Path = ROOT / "docs" / "gallery") -> int:
    out.mkdir(parents=True, exist_ok=True)
    for stem, fig in figures():
        path = out / f"{stem}.png"
        fig.savefig(path, dpi=100)
        print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(*(Path(arg) for arg in sys.argv[1:2])))
