"""Exports the series for upstream review: an mbox, or one branch per patch.

Usage:
  python3 tools/patches/export_patches.py                       # dist/patches/*.mbox + PR texts
  python3 tools/patches/export_patches.py --branches --pytorch-src DIR

Every patch gets a PR description (dist/patches/NNNN-slug.md), from
patches/files.toml: its place in the stack, the motivation with the upstream
issues it answers, what changes for users, a position maintainers declined
before argued with its cost (where the patch takes one), what changed (files
and line counts), the test plan, the measured numbers of the result files
matching the patch's `results` patterns (grouped-mm benchmark runs as
geometric means per dtype and pass, MoE layer runs as ours vs stock per
mode; the history and logs folders only when named by path) followed by its
`results_note` ("No measurements yet" and the note when there are none), and
what was not verified. The texts go upstream, so they quote numbers, not
this repository's paths: a description that names the results folder or the
extension fails tools/patches/check_patches.py. With --branches, DIR gets
branches overlap/NNNN-slug, each stacked on the previous one from the pinned
commit, ready to push and open as PRs.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

import patch_series  # noqa: E402
from patch_series import BuiltPatch, Series  # noqa: E402

_MAX_RESULT_LINES = 20
# Older runs and raw logs: the PR quotes the current results only.
_SKIPPED_RESULT_DIRS = ("history", "logs")


def _result_files(root: Path, patch: BuiltPatch) -> list[Path]:
    results = root / "results"
    found: set[Path] = set()
    for pattern in patch.spec.results:
        if "/" in pattern:  # a path under results/, taken as given
            found.update(p for p in results.glob(pattern) if p.is_file())
            continue
        for path in results.rglob(pattern):
            rel = path.relative_to(results).parts
            if path.is_file() and rel[0] not in _SKIPPED_RESULT_DIRS:
                found.add(path)
    return sorted(found)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def _table(rows: list[dict], columns: Optional[list[str]] = None) -> list[str]:
    """A Markdown table of dict rows (scalar columns only)."""
    if not rows:
        return []
    columns = columns or [k for k, v in rows[0].items()
                          if isinstance(v, (int, float, str, bool))]
    lines = ["| " + " | ".join(columns) + " |",
             "|" + "---|" * len(columns)]
    for row in rows[:_MAX_RESULT_LINES * 2]:
        lines.append("| " + " | ".join(_fmt(row.get(c, "")) for c in columns)
                     + " |")
    if len(rows) > _MAX_RESULT_LINES * 2:
        lines.append(f"| ({len(rows) - _MAX_RESULT_LINES * 2} more rows) |")
    return lines


def _no_dirs(value: object) -> object:
    """A file name instead of an absolute path of the machine that ran."""
    if isinstance(value, str) and value.startswith("/"):
        return Path(value).name
    return value


def _is_moe_layer_run(data: dict) -> bool:
    rows = data.get("results")
    return (isinstance(rows, list) and bool(rows)
            and all(isinstance(r, dict) and "impl" in r and "runs" in r
                    for r in rows))


def _moe_layer_summary(data: dict) -> list[str]:
    """ours vs stock per layer and mode of a tools/bench/bench_moe_layer.py
    run: median step times, their ratio and the host syncs per step."""
    by_layer: dict[str, dict[str, dict]] = {}
    for row in data["results"]:
        by_layer.setdefault(str(row.get("layer", "?")), {})[row["impl"]] = row
    lines = ["| layer | mode | ours ms | stock ms | ours/stock | host syncs "
             "(ours, stock) |", "|---|---|---:|---:|---:|---|"]
    for layer, impls in by_layer.items():
        ours, stock = impls.get("ours"), impls.get("stock")
        if not ours or not stock:
            continue
        for mode, run in ours["runs"].items():
            other = stock["runs"].get(mode)
            if not other or not run.get("median_ms") or not other.get("median_ms"):
                continue
            lines.append(
                f"| {layer} | {mode} | {run['median_ms']:.2f} | "
                f"{other['median_ms']:.2f} | "
                f"{run['median_ms'] / other['median_ms']:.3f} | "
                f"{run.get('host_syncs', '?')}, {other.get('host_syncs', '?')} |")
    return lines


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _grouped_mm_summary(data: dict) -> list[str]:
    """Geometric means per dtype and pass of a tools/bench/bench_grouped_mm.py run
    (ours vs stock, both vs the floor), the worst row, and the checks."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in data["rows"]:
        if row.get("ours_us") and row.get("stock_us") and row.get("floor_us"):
            groups.setdefault((row["dtype"], row["pass"]), []).append(row)
    when = f", {data['timestamp']}" if data.get("timestamp") else ""
    lines = [f"Run: {data.get('gpu', '?')}, torch {data.get('torch', '?')}"
             f"{when}; `{data.get('command', '?')}`. "
             "Geometric means over every case x distribution; ours/stock "
             "< 1 means faster.", "",
             "| dtype | pass | rows | ours/floor | stock/floor | ours/stock "
             "| worst ours/stock | checks passed |",
             "|---|---|---:|---:|---:|---:|---|---:|"]
    for (dtype, pass_), rows in sorted(groups.items()):
        ratio = [r["ours_us"] / r["stock_us"] for r in rows]
        worst = max(rows, key=lambda r: r["ours_us"] / r["stock_us"])
        passed = sum(r.get("ours_check") == "pass" for r in rows)
        lines.append(
            f"| {dtype} | {pass_} | {len(rows)} | "
            f"{_geomean([r['ours_us'] / r['floor_us'] for r in rows]):.2f} | "
            f"{_geomean([r['stock_us'] / r['floor_us'] for r in rows]):.2f} | "
            f"{_geomean(ratio):.2f} | "
            f"{worst['ours_us'] / worst['stock_us']:.2f} ({worst['case']} "
            f"{worst.get('dist', '')}) | {passed}/{len(rows)} |")
    return lines


def _summarise_json(data: object) -> list[str]:
    if isinstance(data, dict):
        if isinstance(data.get("rows"), list) and data["rows"] and all(
                k in data["rows"][0] for k in ("ours_us", "stock_us", "floor_us")):
            return _grouped_mm_summary(data)
        meta = data.get("meta")
        head = ([", ".join(f"{k}: {_fmt(_no_dirs(v))}" for k, v in meta.items()
                           if isinstance(v, (int, float, str))), ""]
                if isinstance(meta, dict) else [])
        if _is_moe_layer_run(data):
            return head + _moe_layer_summary(data)
        for key in ("summary", "best", "geomean", "table"):
            value = data.get(key)
            if isinstance(value, list) and value and isinstance(value[0], dict):
                return head + _table(value)
            if isinstance(value, dict) and value and all(
                    isinstance(v, dict) for v in value.values()):
                return head + _table([{"name": k, **v} for k, v in value.items()])
            if value is not None:
                return head + _summarise_json(value)
        return [f"| {k} | {v} |" for k, v in data.items()
                if isinstance(v, (int, float, str, bool))][:_MAX_RESULT_LINES]
    if isinstance(data, list):
        if data and all(isinstance(item, dict) for item in data):
            return _table(data)
        return [f"- {json.dumps(item)[:160]}" for item in data[:_MAX_RESULT_LINES]]
    return [str(data)]


def measurements(root: Path, patch: BuiltPatch) -> str:
    """Markdown for the measured numbers of one patch, from the result
    files its `results` patterns match. Each file is named by its stem (the
    run), never by its path here: the text goes upstream."""
    files = _result_files(root, patch)
    summarised = {p.with_suffix("") for p in files if p.suffix == ".json"}
    parts = []
    for path in files:
        if path.suffix == ".json":
            try:
                lines = _summarise_json(json.loads(path.read_text()))
            except (ValueError, KeyError, TypeError, ZeroDivisionError) as exc:
                lines = [f"(could not summarise: {exc})"]
        elif path.suffix in (".md", ".txt", ".csv"):
            if path.with_suffix("") in summarised:
                continue
            lines = path.read_text().splitlines()[:_MAX_RESULT_LINES]
        else:
            continue  # plots stay with the result files
        parts.append(f"From the `{path.stem}` run:\n\n" + "\n".join(lines)
                     + "\n")
    note = patch.spec.results_note
    if not parts:
        return "No measurements yet." + (f" {note}" if note else "") + "\n"
    if note:
        parts.append(note + "\n")
    return "\n".join(parts)


def _stack(series: Series, patch: BuiltPatch) -> str:
    patches = series.emitted
    place = patches.index(patch) + 1 if patch in patches else 0
    rows = [f"{i}. {p.spec.subject}" + (" (this PR)" if p is patch else "")
            for i, p in enumerate(patches, 1)]
    return (f"PR {place} of {len(patches)} of a stack against PyTorch "
            f"{series.upstream.tag} ({series.upstream.commit[:12]}); each "
            "applies after the ones above it:\n\n" + "\n".join(rows))


def pr_description(root: Path, series: Series, patch: BuiltPatch) -> str:
    """The PR text of one patch, in Markdown."""
    spec = patch.spec
    changed = "\n".join(
        f"- `{d.path}`: {'new, ' if d.new_file else ''}+{d.added} -{d.removed}"
        for d in patch.file_diffs)
    issues = "\n".join(f"- {ref}: {why}" for ref, why in spec.issues)
    motivation = spec.motivation or "(none given)"
    if issues:
        motivation += "\n\nUpstream issues and PRs:\n\n" + issues
    sections = [
        f"# {spec.subject}",
        _stack(series, patch),
        f"## Motivation\n\n{motivation}",
        f"## What changes for users\n\n{spec.user_changes or '(none given)'}",
    ]
    if spec.declined_before:
        sections.append("## A behaviour upstream declined before\n\n"
                        + spec.declined_before)
    sections += [
        f"## What changed\n\n{changed}\n\n{patch.added} lines added "
        f"(limit {patch_series.MAX_ADDED_LINES}).",
        f"## Test plan\n\n{spec.test_plan or '(none given)'}",
        f"## Measurements\n\n{measurements(root, patch).rstrip()}",
        "## Not verified here\n\n" + ("\n".join(
            t for t in (spec.not_verified, series.not_verified) if t)
            or "(none given)"),
    ]
    return "\n\n".join(sections) + "\n"


def write_mbox(root: Path, series: Series, out: Path) -> Path:
    """One mbox with [PATCH n/N] subjects, ready for ``git am``."""
    total = len(series.emitted)
    text = "".join(
        patch_series.render_patch(series, patch, f"[PATCH {i}/{total}]")
        for i, patch in enumerate(series.emitted, 1))
    path = out / f"grouped-mm-carveout-{series.upstream.tag}.mbox"
    path.write_text(text)
    return path


def _git(src: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=src, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"export_patches: git {' '.join(args)}: "
                         f"{done.stderr.strip()}")
    return done.stdout.strip()


def write_branches(root: Path, series: Series, src: Path) -> list[str]:
    """Creates overlap/NNNN-slug branches in src, stacked from the pin."""
    identity = ["-c", "user.name=overlap-ops export",
                "-c", "user.email=export@overlap-ops.invalid"]
    start = _git(src, "rev-parse", "--abbrev-ref", "HEAD")
    _git(src, "checkout", "--quiet", "--detach", series.upstream.commit)
    branches = []
    try:
        for patch in series.emitted:
            _git(src, *identity, "am", "--quiet",
                 str(root / "patches" / patch.spec.filename))
            name = f"overlap/{patch.spec.filename[:-len('.patch')]}"
            _git(src, "branch", "--force", name)
            branches.append(name)
    finally:
        subprocess.run(["git", "am", "--abort"], cwd=src, capture_output=True,
                       check=False)
        if start != "HEAD":
            _git(src, "checkout", "--quiet", start)
    return branches


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default: dist/patches)")
    parser.add_argument("--branches", action="store_true",
                        help="also create one branch per patch in --pytorch-src")
    parser.add_argument("--pytorch-src", type=Path,
                        help="PyTorch checkout that has the pinned commit")
    parser.add_argument("--root", type=Path, default=patch_series.REPO)
    args = parser.parse_args(argv)
    if args.branches and args.pytorch_src is None:
        parser.error("--branches needs --pytorch-src DIR")
    if args.branches and not (args.pytorch_src / ".git").exists():
        parser.error(f"--pytorch-src {args.pytorch_src} is not a git checkout")
    root = args.root.resolve()
    series = patch_series.build_series(root)
    out = args.out or root / "dist" / "patches"
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for patch in series.emitted:
        md = out / patch.spec.filename.replace(".patch", ".md")
        md.write_text(pr_description(root, series, patch))
        has_numbers = "No measurements yet" not in md.read_text()
        rows.append((patch.spec.filename, md.name,
                     "yes" if has_numbers else "none yet"))
    mbox = write_mbox(root, series, out)
    branches = write_branches(root, series, args.pytorch_src) if args.branches else []
    for name in branches:
        print(f"branch {name}")
    print(f"mbox   {mbox}")
    print(f"\n{'patch':<44} {'description':<40} measurements")
    for name, md, numbers in rows:
        print(f"{name:<44} {md:<40} {numbers}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
