"""Trajectories as runs and evaluations store, filter and show them (one place for both apps)."""
