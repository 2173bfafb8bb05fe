"""Dataset preparation before a run, found by name: `PREPARERS.get(name)(rows) -> Prepared`.

`python -m trainers prepare NAME IN OUT` runs one over a JSONL file. The LIMR filter
(`trainers.data_prep.limr`, `python -m trainers limr`) is separate: it needs a probe run, not just rows.
"""

from trainers.data_prep import tool_n1  # noqa: F401 (registers)
from trainers.data_prep.base import PREPARERS, Prepared, Preparer

__all__ = ["PREPARERS", "Prepared", "Preparer"]
