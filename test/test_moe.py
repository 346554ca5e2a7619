# Owner(s): ["module: nn"]
"""overlap_ops.moe: the sync-free MoE building blocks.

The permutation against a plain per-token loop, the layer (forward,
backward, torch.compile) against a hand-written float64 per-token layer,
and on CUDA a whole training step without host syncs and captured in one
CUDA graph replayed with new routing.
"""

from __future__ import annotations

import os
import sys
import unittest

import torch
import torch.nn.functional as F
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
    onlyCUDA,
)
from torch.testing._internal.common_utils import (
    parametrize,
    run_tests,
    TestCase,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from extension_mode import HAS_EXTENSION, overlap_ops  # noqa: E402
if HAS_EXTENSION:
    from overlap_ops import moe


def _expected_permutation(top_e: torch.Tensor, experts: int, align: int):
    """Per-token loop: (source row list, row of every slot, group ends)."""
    tokens, top_k = top_e.shape
    source, row_of_slot, ends = [], [0] * (tokens * top_k), []
    for e in range(experts):
        for t in range(tokens):
            for j in range(top_k):
                if int(top_e[t, j]) == e:
                    row_of_slot[t * top_k + j] = len(source)
                    source.append(t)
        while len(source) % align:
            source.append(tokens)  # padding reads the appended zero row
        ends.append(len(source))
    return source, row_of_slot, ends


def _reference_moe(layer, x: torch.Tensor,
                   params: dict[str, torch.Tensor] | None = None,
                   x64: torch.Tensor | None = None) -> torch.Tensor:
    """float64 result of the layer, one token and one choice at a time, in
    plain torch ops: differentiable in `params` (float64 copies of the
    layer's parameters, by name) and `x64` (x in float64) when they require
    grad. Routing is decided from `x` in the layer's own precision, so that
    both pick the same experts; only the arithmetic afterwards is float64."""
    with torch.no_grad():
        probs = (x @ layer.router.t()).float().softmax(-1)
        _, top_e = probs.topk(layer.top_k, dim=-1)
    if params is None:
        params = {n: p.detach().double()
                  for n, p in layer.named_parameters()}
    if x64 is None:
        x64 = x.double()
    w13, w2 = params["experts.w13"], params["experts.w2"]
    probs64 = (x64 @ params["router"].t()).softmax(-1)
    top_p = probs64.gather(1, top_e)
    hidden = layer.experts.hidden
    rows = []
    for t in range(x.shape[0]):
        row = torch.zeros(x.shape[1], dtype=torch.float64, device=x.device)
        for j in range(layer.top_k):
            e = int(top_e[t, j])
            h = w13[e] @ x64[t]
            h = F.silu(h[:hidden]) * h[hidden:]
            row = row + top_p[t, j] * (w2[e] @ h)
        rows.append(row)
    return torch.stack(rows)


def _rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.detach().double().cpu() - want.cpu()).norm()
            / want.norm()).item()


def _layer(device, dtype=torch.float32, experts=6, align=1):
    torch.manual_seed(0)
    return moe.MoE(16, 12, experts, 2, align=align, device=device,
                   dtype=dtype)


@unittest.skipIf(not HAS_EXTENSION, "overlap_ops.moe is the extension's")
class TestMoE(TestCase):
    @parametrize("align", [1, 4])
    @parametrize("tokens,experts,top_k", [(13, 6, 2), (3, 8, 2), (20, 4, 4)])
    def test_permute_matches_loop(self, device, align, tokens, experts,
                                  top_k):
        torch.manual_seed(tokens)
        _, top_e = torch.randn(tokens, experts).softmax(-1).topk(top_k)
        perm = moe.permute(top_e.to(device), experts, align)
        source, row_of_slot, ends = _expected_permutation(top_e, experts,
                                                          align)
        capacity = tokens * top_k + experts * (align - 1)
        self.assertEqual(perm.source.shape, (capacity,))
        self.assertEqual(perm.source[:len(source)].tolist(), source)
        self.assertTrue(bool((perm.source[len(source):] == tokens).all()))
        self.assertEqual(perm.row_of_slot.tolist(), row_of_slot)
        self.assertEqual(perm.offs.dtype, torch.int32)
        self.assertEqual(perm.offs.tolist(), ends)
        self.assertEqual(perm.counts.tolist(),
                         torch.bincount(top_e.flatten(), minlength=experts)
                         .tolist())

    def test_permute_rejects_bad_align(self, device):
        with self.assertRaisesRegex(ValueError, "align must be >= 1, got 0"):
            moe.permute(torch.zeros(2, 1, dtype=torch.int64, device=device),
                        4, align=0)

    def test_gather_and_combine_round_trip(self, device):
        tokens, experts, top_k = 9, 5, 3
        x = torch.randn(tokens, 7, device=device)
        top_p, top_e = torch.randn(tokens, experts, device=device) \
            .softmax(-1).topk(top_k)
        for align in (1, 8):
            perm = moe.permute(top_e, experts, align)
            rows = moe.gather(x, perm)
            pad = perm.source == tokens
            self.assertEqual(rows[pad], torch.zeros_like(rows[pad]))
            self.assertEqual(rows[~pad], x[perm.source[~pad]])
            # Identity experts: combine gives x * sum of the chosen weights.
            out = moe.combine(rows, perm, top_p)
            self.assertEqual(out, x * top_p.sum(-1, keepdim=True))

    @parametrize("align", [1, 8])
    def test_forward_matches_per_token_loop(self, device, align):
        layer = _layer(device, align=align)
        x = torch.randn(11, 16, device=device)
        out = layer(x)
        self.assertEqual((out.shape, out.dtype), (x.shape, x.dtype))
        self.assertLessEqual(_rel_err(out, _reference_moe(layer, x)), 1e-5)

    def test_forward_with_empty_experts(self, device):
        # 3 tokens x top-2 of 8 experts: at least two groups are empty.
        layer = _layer(device, experts=8)
        x = torch.randn(3, 16, device=device)
        self.assertLessEqual(_rel_err(layer(x), _reference_moe(layer, x)),
                             1e-5)

    def test_backward_matches_float64(self, device):
        # The reference gradients come from torch's own float64 ops
        # (_reference_moe), never from this layer's kernels.
        layer = _layer(device)
        x = torch.randn(10, 16, device=device, requires_grad=True)
        dout = torch.randn(10, 16, device=device)
        layer(x).backward(dout)
        params = {n: p.detach().double().requires_grad_()
                  for n, p in layer.named_parameters()}
        x64 = x.detach().double().requires_grad_()
        _reference_moe(layer, x.detach(), params, x64).backward(
            dout.double())
        for name, p in layer.named_parameters():
            self.assertLessEqual(_rel_err(p.grad, params[name].grad), 1e-4,
                                 name)
        self.assertLessEqual(_rel_err(x.grad, x64.grad), 1e-4)

    def test_compile_fullgraph_forward_backward(self, device):
        layer = _layer(device, align=4)
        compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
        x = torch.randn(12, 16, device=device)
        dout = torch.randn(12, 16, device=device)
        compiled(x).backward(dout)
        grads = [p.grad.clone() for p in layer.parameters()]
        layer.zero_grad(set_to_none=True)
        layer(x).backward(dout)
        for got, p in zip(grads, layer.parameters()):
            self.assertEqual(got, p.grad)

    def test_route_gives_float32_softmax_weights(self, device):
        # bf16 logits softmaxed in bf16 lose the weights' low bits.
        x = torch.randn(8, 16, device=device, dtype=torch.bfloat16)
        w = torch.randn(4, 16, device=device, dtype=torch.bfloat16)
        top_p, top_e = moe.route(x, w, 2)
        self.assertEqual((top_p.dtype, top_e.dtype),
                         (torch.float32, torch.int64))
        want = F.linear(x, w).float().softmax(-1).topk(2)
        self.assertEqual(top_p, want.values, atol=1e-6, rtol=1e-6)
        self.assertEqual(top_e, want.indices)

    def test_combine_accumulates_in_float32(self, device):
        # Each token's weighted sum over its top-k rows, rounded once to
        # bf16: a bf16 accumulation rounds k times and misses many.
        tokens, experts, top_k, dim = 64, 8, 4, 256
        y = torch.randn(tokens * top_k, dim, device=device,
                        dtype=torch.bfloat16)
        top_p, top_e = torch.randn(tokens, experts, device=device) \
            .softmax(-1).topk(top_k)
        perm = moe.permute(top_e, experts)
        out = moe.combine(y, perm, top_p)
        self.assertEqual(out.dtype, torch.bfloat16)
        rows = y.double().index_select(0, perm.row_of_slot)
        want = torch.einsum("tkd,tk->td", rows.view(tokens, top_k, dim),
                            top_p.double()).to(torch.bfloat16)
        mismatched = (out != want).double().mean().item()
        self.assertLess(mismatched, 0.01)

    def test_experts_init_by_fan_in(self, device):
        # std 1/sqrt(fan_in): D for w13 (E, 2H, D), H for w2 (E, D, H).
        torch.manual_seed(0)
        dim, hidden = 64, 256
        experts = moe.GroupedExperts(4, dim, hidden, device=device)
        self.assertEqual(experts.w13.std().item() * dim ** 0.5, 1.0,
                         atol=0.05, rtol=0)
        self.assertEqual(experts.w2.std().item() * hidden ** 0.5, 1.0,
                         atol=0.05, rtol=0)

    def test_layer_passes_align_and_grouped_mm_to_the_experts(self, device):
        calls = []

        def spy(a, b, offs):
            calls.append(offs.clone())
            return overlap_ops.grouped_mm(a, b, offs)

        torch.manual_seed(0)
        layer = moe.MoE(16, 12, 6, 2, align=8, grouped_mm=spy,
                        device=device)
        x = torch.randn(11, 16, device=device)
        self.assertLessEqual(_rel_err(layer(x), _reference_moe(layer, x)),
                             1e-5)
        self.assertEqual(len(calls), 2)  # w13 and w2
        for offs in calls:
            self.assertEqual((offs % 8).tolist(), [0] * 6)

    def test_public_names(self, device):
        # What the README documents, and nothing private.
        self.assertEqual(sorted(moe.__all__),
                         ["GroupedExperts", "MoE", "Permutation", "combine",
                          "gather", "permute", "route"])
        for name in moe.__all__:
            self.assertTrue(hasattr(moe, name), name)

    @onlyCUDA
    @dtypes(torch.bfloat16)
    def test_training_step_no_host_sync_and_graph_replay(self, device,
                                                          dtype):
        if not overlap_ops.has_cuda_kernels():
            self.skipTest("a CPU-only build of overlap_ops")
        layer = _layer(device, dtype=dtype, experts=8)
        x = torch.randn(64, 16, device=device, dtype=dtype)

        def step():
            out = layer(x)
            return out, torch.autograd.grad(out.float().square().sum(),
                                            list(layer.parameters()))

        step()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            step()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out, _ = step()
        for seed in (1, 2):
            torch.manual_seed(seed)
            with torch.no_grad():
                x.copy_(torch.randn_like(x))  # new data, new routing
            graph.replay()
            torch.cuda.synchronize()
            self.assertLessEqual(_rel_err(out, _reference_moe(layer, x)),
                                 2e-2)


instantiate_device_type_tests(TestMoE, globals(), only_for=("cpu", "cuda"))

if __name__ == "__main__":
    run_tests()
