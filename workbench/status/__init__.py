"""The status page, composed from the selectors of the jobs and runs apps (neither imports the other's
pages)."""
