"""The run report: one self-contained HTML file that shows a run directory as pictures
(message flow, money over time, calls timeline, watch graph, artifacts), offline.

It reads a run directory through the store's readers, so it sits above ``store`` and
below the CLI (``sopbus report``, ``sopbus run --report``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util import lazy_exports

if TYPE_CHECKING:
    from ._build import REPORT_FILE as REPORT_FILE
    from ._build import build_report as build_report
    from ._build import write_report as write_report
    from ._data import RunData as RunData
    from ._data import read_run as read_run
    from ._eval import build_eval_report as build_eval_report
    from ._sweep import build_sweep_report as build_sweep_report

_WHERE: dict[str, str] = {
    "REPORT_FILE": "._build",
    "build_report": "._build",
    "write_report": "._build",
    "build_eval_report": "._eval",
    "build_sweep_report": "._sweep",
    "RunData": "._data",
    "read_run": "._data",
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
