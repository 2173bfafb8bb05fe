"""One rank of a DeepSpeed run's process group: `python -m workbench.runs.execution.rank <run id> <attempt>`.

torchrun starts it N times (execution/process_group.py launches torchrun from the gpu-queue task); it
sets Django up in the worker's environment, which torchrun passes on, and trains its part of the
attempt. Exit status 1 when the rank raised (its end record holds the error).
"""

from __future__ import annotations

import logging
import os
import sys


def main(argv: list[str]) -> int:
    run_id, attempt = int(argv[0]), int(argv[1])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    import django

    django.setup()  # settings.LOGGING: INFO and above to stderr, the group's log
    logging.getLogger().handlers[0].setFormatter(
        logging.Formatter(
            f"%(asctime)s %(levelname)s rank{os.environ.get('RANK', '?')} %(name)s: %(message)s"
        )
    )
    from workbench.runs.execution.rank_attempt import rank_main

    return rank_main(run_id, attempt)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
