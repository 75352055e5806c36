"""Execute the notebooks and store their outputs, or check that the stored outputs are current.

    python scripts/run_notebooks.py                 # run all of notebooks/*.ipynb, write outputs in place
    python scripts/run_notebooks.py notebooks/02-instance-selection.ipynb
    python scripts/run_notebooks.py --check         # run each in memory; compare with the stored numbers

Each notebook runs top to bottom in a fresh ``python3`` kernel from the notebooks folder (nbclient).
A cell error stops that notebook: nothing is written and the script exits 1.  ``--check`` compares
every number printed in a code cell's text outputs (stream and ``text/plain``/``text/html`` results;
images are skipped) with the stored one within a relative tolerance, and exits 1 naming the cells
that changed or a notebook stored without outputs.  Run it after any change to the model.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 300
NUMBER = re.compile(r"(?<![\w.-])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
TEXT_TYPES = ("text/plain", "text/html")


def execute(path: Path):
    """The notebook at ``path`` executed in a fresh kernel (raises CellExecutionError on a failure)."""
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return notebook


def _text(output) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    data = output.get("data", {})
    return "\n".join(data[kind] if isinstance(data[kind], str) else "".join(data[kind])
                     for kind in TEXT_TYPES if kind in data)


def numbers(cell) -> list[float]:
    """Every number in the text outputs of a code cell, in order ('1,234.5' -> 1234.5)."""
    text = "\n".join(_text(output) for output in cell.get("outputs", []))
    return [float(match.replace(",", "")) for match in NUMBER.findall(text)]


def errors(notebook) -> list[str]:
    """'cell N: ename: evalue' for every error output stored in the notebook."""
    return [f"cell {index}: {output.get('ename')}: {output.get('evalue')}"
            for index, cell in enumerate(notebook.cells) if cell.cell_type == "code"
            for output in cell.get("outputs", []) if output.get("output_type") == "error"]


def differences(stored, fresh, rtol: float = 1e-3) -> list[str]:
    """Cells whose printed numbers differ between ``stored`` and ``fresh`` beyond ``rtol``."""
    found = []
    code = [(i, a, b) for i, (a, b) in enumerate(zip(stored.cells, fresh.cells)) if a.cell_type == "code"]
    for index, old, new in code:
        before, after = numbers(old), numbers(new)
        if len(before) != len(after):
            found.append(f"cell {index}: {len(before)} numbers stored, {len(after)} now")
            continue
        changed = [(x, y) for x, y in zip(before, after) if not math.isclose(x, y, rel_tol=rtol, abs_tol=1e-9)]
        if changed:
            x, y = changed[0]
            found.append(f"cell {index}: {len(changed)} numbers changed (first: {x:g} stored, {y:g} now)")
    return found


def has_outputs(notebook) -> bool:
    return any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")


def check(path: Path, rtol: float) -> list[str]:
    """Problems with the stored outputs of ``path`` (empty when they are current)."""
    stored = nbformat.read(path, as_version=4)
    if not has_outputs(stored):
        return [f"{path.name} is stored without outputs: run python scripts/run_notebooks.py {path.name}"]
    return [f"{path.name}: {problem}" for problem in errors(stored) + differences(stored, execute(path), rtol)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: notebooks/*.ipynb)")
    parser.add_argument("--check", action="store_true", help="compare with the stored outputs; write nothing")
    parser.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance of --check (default 1e-3)")
    args = parser.parse_args(argv)
    from nbclient.exceptions import CellExecutionError

    status = 0
    for path in args.notebooks or NOTEBOOKS:
        try:
            if args.check:
                problems = check(path, args.rtol)
                for problem in problems:
                    print(problem, file=sys.stderr)
                status |= bool(problems)
                print(f"{path.name}: {'outputs are current' if not problems else 'OUTDATED'}")
                continue
            notebook = execute(path)
        except CellExecutionError as error:
            print(f"{path.name}: a cell failed, nothing written:\n{str(error)[:2000]}", file=sys.stderr)
            status = 1
            continue
        nbformat.validate(notebook)
        nbformat.write(notebook, path)
        print(f"{path.name}: executed, outputs stored")
    return status


if __name__ == "__main__":
    sys.exit(main())
