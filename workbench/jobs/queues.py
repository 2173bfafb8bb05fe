"""Named Celery queues and task routing; imported by settings, so no Django imports here.

gpu: training and anything that needs an accelerator; rollout: generation and tool calls;
cpu: catalog work such as dataset validation. A worker consumes the queues it is started with (-Q).
"""

from kombu import Queue

QUEUE_NAMES = ("gpu", "rollout", "cpu")
DEFAULT_QUEUE = "cpu"

TASK_QUEUES = tuple(Queue(name, routing_key=name) for name in QUEUE_NAMES)

# Apps put tasks in modules named by what they need; a route by glob keeps the decision here.
TASK_ROUTES = {
    "workbench.runs.tasks.train_*": {"queue": "gpu"},
    "workbench.runs.tasks.rollout_*": {"queue": "rollout"},
    "workbench.evaluations.tasks.rollout_*": {"queue": "rollout"},
    "workbench.*.tasks.*": {"queue": DEFAULT_QUEUE},
}
