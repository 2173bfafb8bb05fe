"""Background jobs: queues and routing, job progress rows, worker heartbeats and the status page."""
