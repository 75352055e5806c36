"""The notebooks are stored with their outputs, produced by executing them, and those outputs are current.

``scripts/run_notebooks.py`` executes every notebook in place; this test executes each one again
and compares every number it prints with the stored one (relative tolerance 1e-2), so a model
change that moves a number shows up here until the notebooks are re-run.
"""

import importlib.util
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
_spec = importlib.util.spec_from_file_location("run_notebooks", ROOT / "scripts" / "run_notebooks.py")
run_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_notebooks)


def test_the_five_notebooks_are_there():
    assert [path.name[:3] for path in NOTEBOOKS] == ["01-", "02-", "03-", "04-", "05-"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebook_is_stored_with_outputs_and_self_contained(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code, f"{path.name} has no code"
    assert "/shared" not in path.read_text(), f"{path.name} reads outside the repository"
    assert "%matplotlib inline" in code[0].source, f"{path.name}: first cell must set the inline backend"
    executed = all(cell.execution_count is not None for cell in code) and run_notebooks.has_outputs(notebook)
    assert executed, f"{path.name} is stored unexecuted: run python scripts/run_notebooks.py"
    assert not run_notebooks.errors(notebook)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_stored_numbers_are_current(path):
    # 1 %: a model change moves numbers by more; a newer numpy/scipy that rounds a fit differently
    # does not (the refit test sets the same bar for the profile's predictions)
    problems = run_notebooks.check(path, rtol=1e-2)
    assert not problems, "\n".join(problems)


def _notebook(*texts):
    cells = [nbformat.v4.new_code_cell("x")]
    cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text=text) for text in texts]
    return nbformat.v4.new_notebook(cells=cells)


def test_numbers_are_read_from_text_outputs():
    cell = _notebook("cost $1,234.5 for 3 nodes, rate 2.7e-04, step -0.5 s; id llmfoundry-026\n").cells[0]
    assert run_notebooks.numbers(cell) == [1234.5, 3.0, 2.7e-4, -0.5]


def test_differences_flag_numbers_that_moved_beyond_the_tolerance():
    stored = _notebook("mape 0.145, n 11")
    assert run_notebooks.differences(stored, _notebook("mape 0.14505, n 11"), rtol=1e-3) == []
    moved = run_notebooks.differences(stored, _notebook("mape 0.150, n 11"), rtol=1e-3)
    assert moved and moved[0].startswith("cell 0: 1 numbers changed")
    assert "2 numbers stored, 1 now" in run_notebooks.differences(stored, _notebook("mape 0.145"))[0]
