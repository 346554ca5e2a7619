"""Short demo: an MoE-style grouped mm whose offsets never leave the device."""

from __future__ import annotations

import torch

import overlap_ops


def main() -> None:
    device = "cuda" if torch.cuda.is_available() and \
        overlap_ops.has_cuda_kernels() else "cpu"
    dtype = torch.bfloat16
    tokens, hidden, ffn, experts = 512, 256, 128, 8
    torch.manual_seed(0)
    x = torch.randn(tokens, hidden, device=device, dtype=dtype)
    w = torch.randn(experts, hidden, ffn, device=device, dtype=dtype)
    # Router output: expert of each token, computed on the device.
    expert = torch.randint(0, experts, (tokens,), device=device)
    order = expert.argsort()
    # scatter_add_ rather than bincount: bincount on CUDA syncs to size its
    # output.
    counts = torch.zeros(experts, dtype=torch.int64, device=device)
    counts.scatter_add_(0, expert, torch.ones_like(expert))
    offs = counts.cumsum(0).to(torch.int32)  # stays on `device`

    out = overlap_ops.grouped_mm(x[order], w, offs)

    ref = torch.cat([x[order][expert[order] == e].double() @ w[e].double()
                     for e in range(experts)])
    err = ((out.double() - ref).norm() / ref.norm()).item()
    print(f"device={device} dtype={dtype} x{tuple(x.shape)} "
          f"w{tuple(w.shape)} -> out{tuple(out.shape)}")
    print(f"tokens per expert: {counts.tolist()}")
    print(f"relative error vs float64: {err:.2e}")
    if not err < 2e-2:
        raise SystemExit("demo: result does not match the reference")


if __name__ == "__main__":
    main()
