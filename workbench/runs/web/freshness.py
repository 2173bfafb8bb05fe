"""Conditional GETs and shared caches for what the live run pages poll.

A run's pages show its row and what its worker streamed, and every write of the latter bumps
`Run.data_version` in the same transaction (ingest.py). A validator made of those fields changes whenever
a response would: an unchanged poll answers 304 Not Modified after the one indexed read of the row that
the access check makes anyway, and a response that every viewer asks for (a step's chart data, the
trajectory list's rows) is built once per server process and version, then served from the cache.
The row is read before the data, so a cached body is never older than the version it is filed under.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.utils.cache import get_conditional_response, patch_cache_control
from django.utils.http import quote_etag

from ..models import Run

T = TypeVar("T")
CACHE_SECONDS = 300  # a superseded version's entry lingers at most this long (or until culled)


def _digest(*parts: object) -> str:
    return hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()


def data_version(run: Run, *parts: object) -> str:
    """The version of what `run` streamed, for one response (`parts`: the endpoint and its parameters).
    `created_at` tells apart a run that reuses a deleted run's id."""
    return _digest(run.pk, run.created_at, run.data_version, run.status, *parts)


def status_version(run: Run, *parts: object) -> str:
    """The version of the status strip's poll (runs/_status_poll.html): the lifecycle fields it shows, and
    the streamed data for its SFT progress, alerts and checkpoints (`parts`: what else it depends on)."""
    lifecycle = (run.status, run.cancel_requested, run.attempts, run.worker, run.last_step, run.phase)
    times = (run.started_at, run.heartbeat_at, run.finished_at)
    streamed = (run.last_checkpoint_step, times, run.error, run.log_tail)
    return data_version(run, "status", lifecycle, *streamed, *parts)


def conditional(request: HttpRequest, etag: str, respond: Callable[[], HttpResponse]) -> HttpResponse:
    """304 when the client's copy carries `etag`, else `respond()`. Either way the response says to
    revalidate before reuse: the browser keeps the body and asks with If-None-Match on the next poll
    (htmx's and fetch()'s requests too), and a 304 hands them the kept body."""
    quoted = quote_etag(etag)
    response = get_conditional_response(request, etag=quoted) or respond()
    response["ETag"] = quoted
    patch_cache_control(response, private=True, no_cache=True)
    return response


def cached(version: str, build: Callable[[], T]) -> T:
    """`build()`'s result for `version`, built once per server process while the version holds."""
    return cache.get_or_set(f"runs:{version}", build, CACHE_SECONDS)


def shared_response(
    request: HttpRequest, version: str, build: Callable[[], bytes | str], content_type: str
) -> HttpResponse:
    """A body that is the same for every viewer allowed to see it: 304 when the client has it, else
    `build()`'s result for `version`, built once per server process."""
    return conditional(
        request, version, lambda: HttpResponse(cached(version, build), content_type=content_type)
    )
