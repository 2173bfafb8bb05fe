"""Outbound requests: the egress policy (importing it is cheap) and the guarded httpx transport
(`trainers.net.guard`, imported where a request is made)."""

from trainers.net.policy import (
    ALLOW_ENV,
    EGRESS_ERROR,
    EgressPolicy,
    current_policy,
    egress_policy,
    is_public,
)

__all__ = ["ALLOW_ENV", "EGRESS_ERROR", "EgressPolicy", "current_policy", "egress_policy", "is_public"]
