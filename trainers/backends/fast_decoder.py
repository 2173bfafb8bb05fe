"""A lean forward pass for Llama-family causal LMs (Qwen2, Llama, Mistral), as vLLM reimplements models.

For a small model, a good part of each decode step through transformers goes to module calls, mask
handling and the `torch.cat` growth of the KV cache rather than to arithmetic. `FastDecoder` runs the same
arithmetic as the transformers implementations (RMSNorm in float32, default RoPE, GQA attention,
SiLU-gated MLP) straight on the live model's weights over a KV cache preallocated per batch:

- q/k/v and gate/up projections are fused into one matrix product each; `FastWeights.from_model`
  concatenates them from the current parameters, and the backend calls it at every `generate`, so
  weights the trainer updated in place are never stale;
- keys and values are written in place into one [layers, 2, rows, kv_heads, capacity, head_dim] buffer,
  sized per batch (prompt columns plus the longest request's new tokens);
- attention is two batched products and a softmax per layer: the query heads sharing a key/value head
  are reshaped into the query axis (no repeated keys), and padding is masked by one additive
  [rows, capacity] bias;
- a finished row leaves by moving a kept row from the end of the batch into its place (only the moved
  rows' written columns are copied), so the loop's row order changes: `keep` returns the new one.

Logits agree with the transformers forward to float rounding (within 1e-5 in float32; bfloat16 models
differ by bfloat16 rounding, as transformers' own attention backends do), so greedy and seeded sampling
pick the same tokens. `unsupported_reason` names what the decoder does not reproduce (other architectures,
RoPE scaling, sliding-window layers, adapters replacing the linear layers); the backend then keeps the
plain model calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trainers.backends.prefill_plan import PrefillPlan
from trainers.backends.prefix_cache import CachedPrefix

SUPPORTED_TYPES = ("qwen2", "llama", "mistral")


def unsupported_reason(model: Any) -> str | None:
    """Why the fast decoder cannot reproduce `model`'s forward, or None when it can."""
    config = getattr(model, "config", None)
    if getattr(config, "model_type", None) not in SUPPORTED_TYPES:
        return f"model type {getattr(config, 'model_type', None)!r} is not one of {SUPPORTED_TYPES}"
    rope = getattr(config, "rope_parameters", None) or {}
    if rope.get("rope_type", "default") != "default":
        return f"RoPE type {rope.get('rope_type')!r} (only the default is reproduced)"
    if "sliding_attention" in (getattr(config, "layer_types", None) or []):
        return "sliding-window attention layers"
    if config.hidden_act != "silu":
        return f"activation {config.hidden_act!r}"
    if model.training and getattr(config, "attention_dropout", 0.0):
        return "attention dropout in training mode"
    base = getattr(model, "model", None)
    if base is None or type(model.lm_head) is not nn.Linear or type(base.embed_tokens) is not nn.Embedding:
        return "unexpected embedding or output layer"
    for layer in base.layers:
        attn, mlp = layer.self_attn, layer.mlp
        linears = (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, mlp.gate_proj, mlp.up_proj)
        if any(type(linear) is not nn.Linear for linear in (*linears, mlp.down_proj)):
            return "projections are not plain nn.Linear (adapters or quantisation)"
    return None


def fits(model: Any, columns: int) -> bool:
    """Whether a batch of `columns` cache columns stays inside the model's sliding window, if any."""
    window = getattr(model.config, "sliding_window", None)
    return window is None or columns <= window


@dataclass
class LayerWeights:
    input_norm: Tensor
    qkv: Tensor
    qkv_bias: Tensor | None
    o: Tensor
    o_bias: Tensor | None
    post_norm: Tensor
    gate_up: Tensor
    gate_up_bias: Tensor | None
    down: Tensor
    down_bias: Tensor | None


def _fused(linears: list[nn.Linear]) -> tuple[Tensor, Tensor | None]:
    """One weight (and bias) stacking the outputs of several linear layers."""
    weight = torch.cat([linear.weight for linear in linears])
    if all(linear.bias is None for linear in linears):
        return weight, None
    biases = [weight.new_zeros(lin.out_features) if lin.bias is None else lin.bias for lin in linears]
    return weight, torch.cat(biases)


@dataclass
class FastWeights:
    """The model's current weights in the layout the decoder uses (detached views, fused copies)."""

    embed: Tensor
    layers: list[LayerWeights]
    norm: Tensor
    lm_head: Tensor
    lm_head_bias: Tensor | None
    inv_freq: Tensor
    eps: float
    heads: int
    kv_heads: int
    head_dim: int

    @classmethod
    @torch.no_grad()
    def from_model(cls, model: Any) -> FastWeights:
        config, base = model.config, model.model
        layers = []
        for layer in base.layers:
            attn, mlp = layer.self_attn, layer.mlp
            qkv, qkv_bias = _fused([attn.q_proj, attn.k_proj, attn.v_proj])
            gate_up, gate_up_bias = _fused([mlp.gate_proj, mlp.up_proj])
            layers.append(
                LayerWeights(
                    layer.input_layernorm.weight.detach(),
                    qkv,
                    qkv_bias,
                    attn.o_proj.weight.detach(),
                    _detached(attn.o_proj.bias),
                    layer.post_attention_layernorm.weight.detach(),
                    gate_up,
                    gate_up_bias,
                    mlp.down_proj.weight.detach(),
                    _detached(mlp.down_proj.bias),
                )
            )
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return cls(
            embed=base.embed_tokens.weight.detach(),
            layers=layers,
            norm=base.norm.weight.detach(),
            lm_head=model.lm_head.weight.detach(),
            lm_head_bias=_detached(model.lm_head.bias),
            inv_freq=base.rotary_emb.inv_freq.detach().float(),
            eps=config.rms_norm_eps,
            heads=config.num_attention_heads,
            kv_heads=config.num_key_value_heads,
            head_dim=head_dim,
        )


def _detached(tensor: Tensor | None) -> Tensor | None:
    return tensor.detach() if tensor is not None else None


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """RMSNorm as transformers computes it: statistics in float32, scaled in the input dtype.

    In float32 torch's fused kernel gives the same bits as transformers' five operations.
    """
    if x.dtype == torch.float32 and weight.dtype == torch.float32:
        return F.rms_norm(x, weight.shape, weight, eps)
    return weight * F.rms_norm(x.float(), weight.shape, eps=eps).to(x.dtype)


def rope_tables(positions: int, inv_freq: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """cos and sign-folded sin [positions, head_dim] for `rope`, computed as transformers does."""
    freqs = torch.arange(positions, device=inv_freq.device).float()[:, None] * inv_freq
    angles = torch.cat((freqs, freqs), dim=-1)
    sin = angles.sin()
    half = sin.shape[-1] // 2
    sin[..., :half].neg_()
    return angles.cos().to(dtype), sin.to(dtype)


def rope(x: Tensor, cos: Tensor, signed_sin: Tensor) -> Tensor:
    """x * cos + rotate_half(x) * sin, with rotate_half's negation folded into `signed_sin` (same bits)."""
    return x * cos + torch.roll(x, x.shape[-1] // 2, dims=-1) * signed_sin


class FastDecoder:
    """Decoding state of one batch: a preallocated KV cache, its padding bias and next positions."""

    def __init__(self, weights: FastWeights, rows: int, capacity: int) -> None:
        self.w = weights
        layers, ref = len(weights.layers), weights.embed
        # a row's written columns are contiguous per head: a step reads only those
        shape = (layers, 2, rows, weights.kv_heads, capacity, weights.head_dim)
        self.kv = torch.empty(shape, dtype=ref.dtype, device=ref.device)
        self.bias = torch.zeros((rows, capacity), dtype=ref.dtype, device=ref.device)  # additive mask
        self.masked = torch.finfo(ref.dtype).min
        self.rows = rows
        self.length = 0  # columns written
        self.next_pos = torch.zeros(rows, dtype=torch.long, device=ref.device)
        # a row's positions count its real tokens, so they stay below the capacity
        self.cos, self.sin = rope_tables(capacity, weights.inv_freq, ref.dtype)

    def prefill(self, plan: PrefillPlan) -> Tensor:
        """Last-position logits of every request's prompt, encoding each distinct suffix once."""
        distinct, columns = plan.attention.shape
        width = plan.width
        if width:
            self._place_prefixes(plan.hits, width)
        self.length = width
        self.bias[:distinct, :columns].masked_fill_(plan.attention == 0, self.masked)
        real = plan.attention.bool()[:, None, None, :]
        steps = plan.input_ids.shape[1]
        query = torch.arange(steps, device=real.device)[:, None]
        key = torch.arange(columns, device=real.device)[None, :] - width
        allowed = real & (key <= query)  # prefix columns have key < 0
        mask = torch.zeros(allowed.shape, dtype=self.bias.dtype, device=real.device)
        logits = self.forward(plan.input_ids, plan.positions, mask.masked_fill_(~allowed, self.masked))
        self.next_pos = plan.positions[:, -1] + 1
        if len(plan.row_of) > distinct:  # copy the rows of repeated prompts
            self.rows = distinct
            index = torch.tensor(plan.row_of, device=logits.device)
            self.select(index)
            logits = logits[index]
        return logits

    def _place_prefixes(self, hits: list[CachedPrefix | None], width: int) -> None:
        """Each cached prefix right-aligned in the first `width` columns, zeros (masked) before it."""
        self.kv[:, :, : len(hits), :, :width] = 0
        for row, hit in enumerate(hits):
            if hit is not None and hit.length:
                for index, (keys, values) in enumerate(hit.layers):
                    self.kv[index, 0, row, :, width - hit.length : width] = keys
                    self.kv[index, 1, row, :, width - hit.length : width] = values

    def step(self, tokens: Tensor) -> Tensor:
        """Logits after feeding one token per row."""
        mask = self.bias[: self.rows, None, None, : self.length + 1]
        logits = self.forward(tokens.unsqueeze(-1), self.next_pos.unsqueeze(-1), mask)
        self.next_pos = self.next_pos + 1
        return logits

    def keep(self, rows: list[int]) -> list[int]:
        """Drop the other rows by moving kept rows from the end into the gaps; returns the new order."""
        kept = set(rows)
        gaps = [row for row in range(len(rows)) if row not in kept]
        movers = [row for row in rows if row >= len(rows)]
        order = list(range(len(rows)))
        for gap, mover in zip(gaps, movers, strict=True):
            order[gap] = mover
        if gaps:
            to, source = torch.tensor(gaps), torch.tensor(movers)
            to, source, cols = to.to(self.bias.device), source.to(self.bias.device), self.length
            self.kv[:, :, to, :, :cols] = self.kv[:, :, source, :, :cols]
            self.bias[to, :cols] = self.bias[source, :cols]
        self.next_pos = self.next_pos[torch.tensor(order, device=self.next_pos.device)]
        self.rows = len(rows)
        return order

    def select(self, index: Tensor) -> None:
        """Keep only the rows at `index`, in that order, moving their written columns to the front."""
        rows, cols = len(index), self.length
        self.kv[:, :, :rows, :, :cols] = self.kv[:, :, index, :, :cols]
        self.bias[:rows, :cols] = self.bias[index, :cols]
        self.next_pos = self.next_pos[index]
        self.rows = rows

    def prefix(self, row: int) -> CachedPrefix:
        """The keys and values of one row's real tokens, copied out of the cache."""
        columns = (self.bias[row, : self.length] == 0).nonzero().squeeze(-1)
        kv = self.kv[:, :, row, :, columns]  # [layers, 2, kv_heads, length, head_dim]
        return CachedPrefix(len(columns), [(layer[0], layer[1]) for layer in kv])

    def forward(self, ids: Tensor, positions: Tensor, mask: Tensor) -> Tensor:
        """Write the keys and values of `ids` [rows, T] at the next columns; return last-position logits.

        `mask` is additive, [rows, 1, T, written + T] (or broadcastable to it). Activations outside
        attention are [rows * T, hidden], so every projection is one plain matrix product.
        """
        w = self.w
        rows, steps = ids.shape
        heads, kv_heads, dim = w.heads, w.kv_heads, w.head_dim
        groups, start, end = heads // kv_heads, self.length, self.length + steps
        if steps > 1:  # queries sharing a key/value head are laid out along the query axis
            mask = mask.repeat(1, 1, groups, 1)
        x = F.embedding(ids.reshape(-1), w.embed)
        cos, sin = self.cos[positions][:, None], self.sin[positions][:, None]
        softmax_dtype = torch.promote_types(x.dtype, torch.float32)  # half precisions in float32, as HF
        for index, layer in enumerate(w.layers):
            h = rms_norm(x, layer.input_norm, w.eps)
            qkv = F.linear(h, layer.qkv, layer.qkv_bias).view(rows, steps, -1, dim).transpose(1, 2)
            qk = rope(qkv[:, : heads + kv_heads], cos, sin)
            keys, values = self.kv[index, 0, :rows, :, :end], self.kv[index, 1, :rows, :, :end]
            keys[:, :, start:] = qk[:, heads:]
            values[:, :, start:] = qkv[:, heads + kv_heads :]
            query = qk[:, :heads].reshape(rows, kv_heads, groups * steps, dim)
            scores = torch.matmul(query, keys.transpose(-1, -2)).mul_(dim**-0.5).add_(mask)
            probs = torch.softmax(scores, dim=-1, dtype=softmax_dtype).to(x.dtype)
            attn = torch.matmul(probs, values)
            attn = attn.view(rows, heads, steps, dim).transpose(1, 2).reshape(rows * steps, heads * dim)
            x = x + F.linear(attn, layer.o, layer.o_bias)
            h = rms_norm(x, layer.post_norm, w.eps)
            gate, up = F.linear(h, layer.gate_up, layer.gate_up_bias).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, layer.down, layer.down_bias)
        self.length = end
        last = x.view(rows, steps, -1)[:, -1]
        return F.linear(rms_norm(last, w.norm, w.eps), w.lm_head, w.lm_head_bias)
