"""A cancel seen by one rank stops every rank's SFT after the same step (a real gloo process group)."""

from __future__ import annotations

import os
import socket

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from trainers.training.engines.collectives import group_should_stop

POLLS = 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, out: dict) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    polls = {"n": 0}

    def own_flag() -> bool:  # only rank 1 reads the cancel, at its third poll
        polls["n"] += 1
        return rank == 1 and polls["n"] >= 3

    should_stop = group_should_stop(own_flag)
    out[rank] = [should_stop() for _ in range(POLLS)]
    dist.destroy_process_group()


@pytest.mark.slow
def test_every_rank_stops_at_the_poll_where_any_rank_saw_the_cancel():
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_rank, args=(2, _free_port(), out), nprocs=2, join=True)
        seen = dict(out)
    assert seen == {0: [False, False, True, True, True], 1: [False, False, True, True, True]}


def test_outside_a_process_group_the_flag_is_passed_through():
    flag = lambda: True  # noqa: E731
    assert group_should_stop(flag) is flag and group_should_stop(None) is None
