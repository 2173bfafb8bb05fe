"""The status page, composed from the selectors of the jobs and runs apps (jobs itself knows no runs)."""
