import random

import numpy as np
import torch

from trainers.training.checkpoint import (
    checkpoint_dir,
    latest_checkpoint,
    load_checkpoint,
    load_model_weights,
    save_checkpoint,
)
from trainers.training.policy import ValueHead


def _train_step(model, optimizer, scheduler):
    loss = model(input_ids=torch.randint(0, 32, (2, 5))).logits.pow(2).mean()
    loss.backward()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()


def _setup(model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (1 + s))
    return optimizer, scheduler


def test_resume_continues_to_the_same_weights(model, tmp_path):
    optimizer, scheduler = _setup(model)
    _train_step(model, optimizer, scheduler)
    path = save_checkpoint(
        checkpoint_dir(tmp_path, 1), step=1, model=model, optimizer=optimizer, scheduler=scheduler
    )
    _train_step(model, optimizer, scheduler)  # draws its batch from the torch RNG saved above
    fresh = type(model)(model.config)
    fresh_opt, fresh_sched = _setup(fresh)
    resumed = load_checkpoint(path, model=fresh, optimizer=fresh_opt, scheduler=fresh_sched)
    _train_step(fresh, fresh_opt, fresh_sched)
    assert resumed.step == 1 and fresh_sched.last_epoch == 2
    for key, value in fresh.state_dict().items():
        assert torch.equal(value, model.state_dict()[key]), key


def test_resume_restores_rngs_value_head_and_extra_state(model, tmp_path):
    head = ValueHead(32)
    torch.nn.init.normal_(head.linear.weight)
    path = save_checkpoint(tmp_path / "c", step=3, model=model, value_head=head, extra={"cursor": 7})
    expected = (random.random(), float(np.random.rand()), torch.rand(2))
    fresh_head = ValueHead(32)
    resumed = load_checkpoint(path, model=type(model)(model.config), value_head=fresh_head)
    assert (resumed.step, resumed.extra) == (3, {"cursor": 7})
    assert torch.equal(fresh_head.linear.weight, head.linear.weight)
    assert (random.random(), float(np.random.rand())) == expected[:2]
    assert torch.equal(torch.rand(2), expected[2])


def test_latest_checkpoint_ignores_unfinished_ones(model, tmp_path):
    save_checkpoint(checkpoint_dir(tmp_path, 2), step=2, model=model)
    save_checkpoint(checkpoint_dir(tmp_path, 10), step=10, model=model)
    checkpoint_dir(tmp_path, 12).mkdir()  # a crash before trainer_state.pt was written
    assert latest_checkpoint(tmp_path).name == "step_000010"


def test_checkpoint_loads_with_from_pretrained(model, tmp_path):
    from transformers import AutoModelForCausalLM

    path = save_checkpoint(tmp_path / "c", step=0, model=model)
    loaded = AutoModelForCausalLM.from_pretrained(path)
    ids = torch.tensor([[1, 2, 3]])
    assert torch.allclose(loaded(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-6)


def test_a_sharded_checkpoint_resumes_like_a_single_file(model, tmp_path):
    """save_pretrained shards a model larger than its shard size (an 8B model in fp32 is 32 GB); resuming
    reads every shard its index lists."""
    model.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    assert len(list((tmp_path / "sharded").glob("model-*.safetensors"))) > 1
    fresh = type(model)(model.config)
    load_model_weights(fresh, tmp_path / "sharded")
    for key, value in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[key], value), key
