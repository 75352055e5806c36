"""Every notebook in notebooks/ runs headless, top to bottom, without a cell error.

The notebooks are stored without outputs and stand alone (no path outside the repository).
Run one by hand: ``jupyter nbconvert --to notebook --execute notebooks/01-quickstart.ipynb``.
"""

from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 120


def test_the_five_notebooks_are_there():
    assert [path.name[:3] for path in NOTEBOOKS] == ["01-", "02-", "03-", "04-", "05-"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebook_is_stored_clean_and_self_contained(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code, f"{path.name} has no code"
    assert all(not cell.outputs and cell.execution_count is None for cell in code), \
        f"{path.name} is stored with outputs; clear them before committing"
    assert "/shared" not in path.read_text(), f"{path.name} reads outside the repository"
    assert "%matplotlib inline" in code[0].source, f"{path.name}: first cell must set the inline backend"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebook_executes(path):
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError (with the cell and traceback) on the first failure
