"""Run a function in a persistent worker process with hard CPU, memory, time and output bounds.

Answer checking and prompt-template rendering evaluate text that users and models write; a big-integer
power or a runaway template loop must not freeze the calling process (a web worker, a training run).
`BoundedRunner.call("trainers.x:fn", *args)` runs `fn(*args)` in a reused child process (no fork per
call): RLIMIT_CPU and RLIMIT_AS hold in the child, a wall-clock deadline kills and replaces it, and a
result larger than the cap is refused. Arguments and results travel as JSON.
"""

from trainers.bounded.runner import BoundedCallError, BoundedRunner, BoundsExceeded, Limits

__all__ = ["BoundedCallError", "BoundedRunner", "BoundsExceeded", "Limits"]
