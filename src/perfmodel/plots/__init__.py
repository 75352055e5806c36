"""Figures drawn from the public API's outputs (matplotlib is imported only in here).

Every function returns a matplotlib ``Figure`` built without pyplot state: show it in a notebook
by leaving it as a cell's value, save it with ``fig.savefig("name.png", dpi=100)``.
"""

from perfmodel.plots.breakdown import breakdown
from perfmodel.plots.comm import busbw_figure
from perfmodel.plots.memory import memory
from perfmodel.plots.pareto import pareto
from perfmodel.plots.roofline import roofline
from perfmodel.plots.scaling import scaling_plot
from perfmodel.plots.validation import prediction_error

__all__ = ["breakdown", "busbw_figure", "memory", "pareto", "prediction_error", "roofline", "scaling_plot"]
