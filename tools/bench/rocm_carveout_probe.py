"""Checks the ROCm CU-mask carveout on a real AMD GPU (MI300X and others).

Needs a ROCm build of torch and overlap_ops built against it (only the
portable mask builder is used, through
``overlap_ops._testing.rocm_sm_carveout_cu_mask``, the function the
masked-stream cache builds its masks with).
For each carveout k it creates a stream with our mask through
``hipExtStreamCreateWithCUMask`` (ctypes on libamdhip64), times a large
compute-bound bf16 matmul on it, and compares with stock torch's own
carveout (``torch._C._set_sm_carveout_experimental``). k counts SMs as HIP
reports them (multi_processor_count: CUs, or WGPs on gfx10+ in WGP mode). A
GEMM that really runs on SMs - k slows down by about SMs / (SMs - k);
upstream's mask (k CUs enabled) slows down by about SMs / k.

    python3 tools/bench/rocm_carveout_probe.py                 # on the GPU machine
    python3 tools/bench/rocm_carveout_probe.py --dry-run       # masks only, no GPU

Writes every measurement to --out (JSON) and prints a short table last.
"""

from __future__ import annotations

import argparse
import ctypes
import json
from pathlib import Path

import torch

from overlap_ops import _testing  # the mask builder the masked streams use

_HIP_ATTRIBUTE_NUMBER_OF_XCCS = 10018  # hipDeviceAttributeNumberOfXccs
# hipDeviceAttributePhysicalMultiProcessorCount: CUs, also in WGP mode.
_HIP_ATTRIBUTE_PHYSICAL_CUS = 10015
_GFX10_ARCH_DIGITS = 4  # gfx1030, gfx1100 vs gfx90a, gfx942


def _topology(device: int) -> tuple[int, int, int, bool, str]:
    """(CUs, CUs per SM, XCCs, WGP pairs, arch) of a ROCm device, as
    aten/src/ATen/hip/CarveoutStreamHIP.cpp queries them."""
    props = torch.cuda.get_device_properties(device)
    arch = props.gcnArchName.split(":")[0]
    hip = ctypes.CDLL("libamdhip64.so")
    num_xcc = ctypes.c_int(1)
    if hip.hipDeviceGetAttribute(ctypes.byref(num_xcc),
                                 _HIP_ATTRIBUTE_NUMBER_OF_XCCS, device) != 0:
        num_xcc.value = 1  # HIP < 7: the mask is balanced for any count
    sms = props.multi_processor_count
    cus = ctypes.c_int(0)
    if hip.hipDeviceGetAttribute(ctypes.byref(cus),
                                 _HIP_ATTRIBUTE_PHYSICAL_CUS, device) != 0:
        cus.value = sms
    wgp = len(arch) - len("gfx") >= _GFX10_ARCH_DIGITS
    return cus.value, cus.value // sms, max(num_xcc.value, 1), wgp, arch


def _masked_stream(mask: list[int]) -> torch.cuda.ExternalStream:
    """A HIP stream created with ``mask`` (set bit = CU enabled).

    Never destroyed: one per k for the life of this short-lived probe.
    """
    hip = ctypes.CDLL("libamdhip64.so")
    stream = ctypes.c_void_p()
    words = (ctypes.c_uint32 * len(mask))(*mask)
    status = hip.hipExtStreamCreateWithCUMask(
        ctypes.byref(stream), ctypes.c_uint32(len(mask)), words)
    if status != 0:
        raise RuntimeError(f"hipExtStreamCreateWithCUMask failed: {status}")
    return torch.cuda.ExternalStream(stream.value)


def _time_mm_ms(a: torch.Tensor, b: torch.Tensor, iters: int,
                stream: torch.cuda.Stream) -> float:
    """Median time of a @ b (a: (n, n) bf16, b: (n, n) bf16) on stream."""
    times = []
    with torch.cuda.stream(stream):
        for _ in range(3):
            a @ b  # warm-up (and hipBLASLt heuristics)
        for _ in range(iters):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record(stream)
            a @ b
            end.record(stream)
            end.synchronize()
            times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def _time_upstream_ms(a: torch.Tensor, b: torch.Tensor, k: int,
                      iters: int) -> float:
    """The same matmul under stock torch's own ROCm carveout."""
    torch._C._set_sm_carveout_experimental(k)
    try:
        return _time_mm_ms(a, b, iters, torch.cuda.current_stream())
    finally:
        torch._C._set_sm_carveout_experimental(None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", default="0,8,16,32,64,152")
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--dry-run", action="store_true",
                        help="print MI300X masks without a GPU")
    parser.add_argument("--out", default="results/tmp/rocm_carveout_probe.json")
    args = parser.parse_args()
    ks = [int(k) for k in args.ks.split(",")]

    if args.dry_run:
        cus, per_sm, num_xcc, wgp, arch = 304, 1, 8, False, "gfx942 (assumed)"
    else:
        cus, per_sm, num_xcc, wgp, arch = _topology(
            torch.cuda.current_device())
        a = torch.randn(args.size, args.size, device="cuda",
                        dtype=torch.bfloat16)
        b = torch.randn_like(a)
        full = _time_mm_ms(a, b, args.iters, torch.cuda.current_stream())

    sms = cus // per_sm
    rows = []
    for k in ks:
        mask = _testing.rocm_sm_carveout_cu_mask(cus, per_sm, k, num_xcc,
                                                 wgp)
        row = {"k": k, "mask": [hex(w) for w in mask],
               "enabled": sum(bin(w).count("1") for w in mask),
               "expected_ratio": sms / (sms - k)}
        if not args.dry_run:
            ours = _time_mm_ms(a, b, args.iters, _masked_stream(mask))
            upstream = _time_upstream_ms(a, b, k, args.iters) if k else full
            row.update(full_ms=full, ours_ms=ours, ours_ratio=ours / full,
                       upstream_ms=upstream, upstream_ratio=upstream / full)
        rows.append(row)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"arch": arch, "cus": cus, "cus_per_sm": per_sm,
                               "num_xcc": num_xcc, "wgp_pairs": wgp,
                               "rows": rows}, indent=2))
    print(f"{arch}: {cus} CUs ({sms} SMs), {num_xcc} XCCs; full data in {out}")
    print(f"{'k':>5} {'CUs on':>6} {'want':>6} {'ours':>6} {'upstrm':>7}"
          "  (time ratios vs no carveout)")
    for row in rows:
        ours = f"{row.get('ours_ratio', float('nan')):6.2f}"
        upstream = f"{row.get('upstream_ratio', float('nan')):7.2f}"
        print(f"{row['k']:>5} {row['enabled']:>6} "
              f"{row['expected_ratio']:6.2f} {ours} {upstream}")


if __name__ == "__main__":
    main()
