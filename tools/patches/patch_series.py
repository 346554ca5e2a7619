"""Builds the patch series against upstream PyTorch from this repository.

The series has one source of truth per kind of content:

* new upstream files come from ``aten/`` (and ``test/`` for Python tests;
  C++ tests live at their upstream place, ``aten/src/ATen/test/``), copied
  byte for byte into ``new file`` diffs, never edited by hand;
* the few hunks against files upstream already has (dispatch entries,
  derivatives, meta registrations) live in ``patches/edits/NNNN-slug.diff``;
* an edits file may also change a file that an earlier patch of the series
  adds (so a later PR can hook into an earlier one's code): ``aten/`` holds
  the file as it is after the whole series, and the earlier patch carries
  it with those later hunks taken back out;
* ``patches/files.toml`` says which files and which edits make each patch.

``build_series`` turns those into ``patches/NNNN-slug.patch`` texts in
``git format-patch`` form; ``tools/patches/sync_patches.py`` writes them and
``tools/patches/check_patches.py`` proves they are current and apply.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import os
import re
from pathlib import Path
from typing import Optional

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[2]
MAPPING = "patches/files.toml"
UPSTREAM = "patches/UPSTREAM"
SERIES = "patches/series"
# Roots whose files must each belong to exactly one patch.
SOURCE_ROOT = "aten/"
TEST_ROOT = "test/"
# One patch is one upstream PR: at most this many added lines.
MAX_ADDED_LINES = 4000
# What no patch may name: this repository's extension (its Python package,
# its C++ namespace, its OVERLAP_OPS_* switches) and its results folder.
FORBIDDEN_NAMES = re.compile(r"(?i:overlap[_-]ops)|results/")


@dataclasses.dataclass(frozen=True)
class Upstream:
    """The pinned upstream base: tag, its commit and where to clone it."""

    tag: str
    commit: str
    url: str
    version: str


@dataclasses.dataclass(frozen=True)
class PatchSpec:
    """One entry of files.toml: what one upstreamable patch carries."""

    number: int
    slug: str
    subject: str
    motivation: str
    test_plan: str
    sources: tuple[str, ...]  # fnmatch patterns, relative to the repo root
    # (path here, path upstream): Python tests under test/, C++ tests under
    # aten/ (which then belong to no `sources` pattern).
    tests: tuple[tuple[str, str], ...]
    edits: Optional[str]  # path relative to patches/
    requires: tuple[str, ...]  # repo paths that must exist to emit the patch
    results: tuple[str, ...]  # glob patterns under results/
    # Said in the PR description when results/ has nothing for the patch.
    results_note: str = ""
    # PR description only (tools/patches/export_patches.py): the upstream
    # issues and PRs the patch answers, what changes for users, and what was
    # not verified.
    issues: tuple[tuple[str, str], ...] = ()  # ("#123", why it is cited)
    user_changes: str = ""
    # A behaviour upstream maintainers declined before, argued with its cost.
    declined_before: str = ""
    not_verified: str = ""

    @property
    def filename(self) -> str:
        return f"{self.number:04d}-{self.slug}.patch"


@dataclasses.dataclass(frozen=True)
class Hunk:
    """One ``@@`` hunk of a file diff; ``header`` is the ``@@`` line."""

    header: str
    old_start: int
    old_len: int
    new_start: int = 0
    new_len: int = 0


@dataclasses.dataclass(frozen=True)
class FileDiff:
    """The diff of one upstream path inside a patch."""

    path: str  # upstream path
    text: str  # from "diff --git" up to the next file diff
    origin: str  # repo path it was generated from, or the edits file
    new_file: bool
    hunks: tuple[Hunk, ...]

    @property
    def added(self) -> int:
        return _count_lines(self.text, "+")

    @property
    def removed(self) -> int:
        return _count_lines(self.text, "-")


@dataclasses.dataclass
class BuiltPatch:
    """A patch spec with its generated file diffs and edit diffs."""

    spec: PatchSpec
    new_files: list[FileDiff]
    edits: list[FileDiff]
    pending: Optional[str]  # why the patch is not in the series yet

    @property
    def file_diffs(self) -> list[FileDiff]:
        return self.new_files + self.edits

    @property
    def added(self) -> int:
        """Lines the patch adds, as its diffstat counts them."""
        return sum(d.added for d in self.file_diffs)


@dataclasses.dataclass
class Series:
    """Everything the tools need: pin, patches, and mapping problems."""

    upstream: Upstream
    author: str
    date: str
    patches: list[BuiltPatch]
    problems: list[str]  # mapping errors: each one fails the check
    notes: list[str]  # informational (e.g. test files in no patch)
    # (patch file name, path + hunk header) of the hunks against files an
    # earlier patch adds: proved here by taking them back out of aten/.
    series_hunks: set[tuple[str, str]] = dataclasses.field(default_factory=set)
    # Said in every PR description ([series] not_verified).
    not_verified: str = ""

    @property
    def emitted(self) -> list[BuiltPatch]:
        return [p for p in self.patches if p.pending is None]


def _count_lines(text: str, sign: str) -> int:
    count = 0
    for line in text.splitlines():
        if line.startswith(sign) and not line.startswith(sign * 3 + " "):
            count += 1
    return count


def load_upstream(root: Path = REPO) -> Upstream:
    """Reads patches/UPSTREAM (TOML: tag, commit, url, version)."""
    data = tomllib.loads((root / UPSTREAM).read_text())
    commit = str(data["commit"])
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise ValueError(f"{UPSTREAM}: commit must be 40 hex digits, got {commit!r}")
    return Upstream(tag=str(data["tag"]), commit=commit, url=str(data["url"]),
                    version=str(data["version"]))


def _tests_of(entry: dict) -> tuple[tuple[str, str], ...]:
    tests = []
    for item in entry.get("tests", []):
        if isinstance(item, str):
            tests.append((item, item))
        else:
            tests.append((str(item["src"]), str(item.get("dst", item["src"]))))
    return tuple(tests)


def load_specs(root: Path = REPO) -> tuple[dict, list[PatchSpec]]:
    """Reads patches/files.toml; returns its [series] table and the specs."""
    data = tomllib.loads((root / MAPPING).read_text())
    specs = []
    for entry in data.get("patch", []):
        specs.append(PatchSpec(
            number=int(entry["number"]),
            slug=str(entry["slug"]),
            subject=str(entry["subject"]),
            motivation=str(entry.get("motivation", "")).strip(),
            test_plan=str(entry.get("test_plan", "")).strip(),
            sources=tuple(entry.get("sources", [])),
            tests=_tests_of(entry),
            edits=entry.get("edits"),
            requires=tuple(entry.get("requires", [])),
            results=tuple(entry.get("results", [])),
            results_note=str(entry.get("results_note", "")).strip(),
            issues=tuple((str(i["ref"]), str(i["why"]).strip())
                         for i in entry.get("issues", [])),
            user_changes=str(entry.get("user_changes", "")).strip(),
            declined_before=str(entry.get("declined_before", "")).strip(),
            not_verified=str(entry.get("not_verified", "")).strip(),
        ))
    specs.sort(key=lambda s: s.number)
    numbers = [s.number for s in specs]
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"{MAPPING}: patch numbers repeat: {numbers}")
    return data.get("series", {}), specs


def _tracked_files(root: Path, top: str) -> list[str]:
    base = root / top
    if not base.is_dir():
        return []
    found = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames
                             if d != "__pycache__" and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith((".pyc", ".orig", ".rej", "~")):
                continue
            found.append(Path(dirpath, name).relative_to(root).as_posix())
    return found


def _blob_id(data: bytes) -> str:
    """The git blob id of ``data``, as ``git hash-object`` computes it."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def new_file_diff(path: str, data: bytes, executable: bool = False) -> str:
    """A ``git diff`` text that creates ``path`` with content ``data``."""
    mode = "100755" if executable else "100644"
    head = (f"diff --git a/{path} b/{path}\n"
            f"new file mode {mode}\n"
            f"index 0000000..{_blob_id(data)[:7]}\n")
    if not data:
        return head
    text = data.decode("utf-8")
    lines = text.split("\n")
    ends_with_newline = lines[-1] == ""
    if ends_with_newline:
        lines = lines[:-1]
    body = "".join(f"+{line}\n" for line in lines)
    if not ends_with_newline:
        body += "\\ No newline at end of file\n"
    count = len(lines)
    span = "1" if count == 1 else f"1,{count}"
    return head + f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +{span} @@\n" + body


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def split_file_diffs(text: str, origin: str) -> list[FileDiff]:
    """Splits a multi-file git diff into one FileDiff per path."""
    blocks: list[list[str]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git "):
            blocks.append([])
        if blocks:
            blocks[-1].append(line)
    diffs = []
    for block in blocks:
        match = re.match(r"diff --git a/(\S+) b/(\S+)", block[0])
        if not match:
            raise ValueError(f"{origin}: bad diff header {block[0]!r}")
        hunks = []
        for line in block:
            hunk = _HUNK.match(line)
            if hunk:
                old_len = 1 if hunk.group(2) is None else int(hunk.group(2))
                new_len = 1 if hunk.group(4) is None else int(hunk.group(4))
                hunks.append(Hunk(line.rstrip("\n"), int(hunk.group(1)),
                                  old_len, int(hunk.group(3)), new_len))
        diffs.append(FileDiff(
            path=match.group(2), text="".join(block), origin=origin,
            new_file=any(l.startswith("new file mode") for l in block[:4]),
            hunks=tuple(hunks)))
    return diffs


class HunkMismatch(ValueError):
    """A hunk whose lines are not where its header says."""


def _hunk_lines(diff: FileDiff) -> list[tuple[Hunk, list[str], list[str]]]:
    """Each hunk of diff with its old lines (context and '-') and its new
    lines (context and '+'), without the leading marker. A hunk's body is
    as long as its header says, so a body line such as '--- x' is read as
    a removed line, not as a file header."""
    out: list[tuple[Hunk, list[str], list[str]]] = []
    hunks = iter(diff.hunks)
    old_left = new_left = 0
    for line in diff.text.splitlines():
        if old_left == 0 and new_left == 0:
            if line.startswith("@@"):
                hunk = next(hunks)
                out.append((hunk, [], []))
                old_left, new_left = hunk.old_len, hunk.new_len
            continue
        if line.startswith("\\"):
            raise HunkMismatch(f"{diff.path}: a file without a final newline "
                               "cannot be edited by a later patch")
        marker, body = line[:1], line[1:]
        if marker != "+":
            out[-1][1].append(body)
            old_left -= 1
        if marker != "-":
            out[-1][2].append(body)
            new_left -= 1
    return out


def apply_hunks(text: str, diff: FileDiff, reverse: bool = False) -> str:
    """text with diff's hunks applied exactly where their headers say (no
    fuzz, no offset); reverse takes them back out. Raises HunkMismatch
    naming the first hunk whose lines are not there."""
    if text and not text.endswith("\n"):
        raise HunkMismatch(f"{diff.path}: a file without a final newline "
                           "cannot be edited by a later patch")
    lines = text.splitlines()
    shift = 0
    for hunk, old, new in _hunk_lines(diff):
        start, length, want, put = (
            (hunk.new_start, hunk.new_len, new, old) if reverse
            else (hunk.old_start, hunk.old_len, old, new))
        at = (start if length == 0 else start - 1) + shift
        if lines[at:at + len(want)] != want:
            raise HunkMismatch(f"{hunk.header} of {diff.path}")
        lines[at:at + len(want)] = put
        shift += len(put) - len(want)
    return "".join(line + "\n" for line in lines)


def _match_sources(files: list[str], specs: list[PatchSpec]
                   ) -> tuple[dict[int, list[str]], list[str]]:
    owned: dict[int, list[str]] = {s.number: [] for s in specs}
    problems = []
    for path in files:
        owners = [s for s in specs
                  if any(fnmatch.fnmatchcase(path, pat) for pat in s.sources)]
        if not owners:
            problems.append(
                f"{path} is in no patch: add it to the `sources` of one "
                f"[[patch]] in {MAPPING}, then run tools/patches/sync_patches.py")
        elif len(owners) > 1:
            names = ", ".join(s.filename for s in owners)
            problems.append(f"{path} matches several patches ({names}): "
                            f"make the `sources` patterns in {MAPPING} disjoint")
        else:
            owned[owners[0].number].append(path)
    return owned, problems


def _aten_tests(specs: list[PatchSpec]) -> tuple[set[str], list[str]]:
    """The C++ tests the patches carry under aten/, and the problems: a
    test in two patches, or one that a `sources` pattern also takes."""
    problems = []
    seen: dict[str, str] = {}
    for spec in specs:
        for src, _ in spec.tests:
            if not src.startswith(SOURCE_ROOT):
                continue
            if src in seen:
                problems.append(f"{src} is a test of {seen[src]} and of "
                                f"{spec.filename}: keep it in one")
            seen[src] = spec.filename
            if any(fnmatch.fnmatchcase(src, pat)
                   for s in specs for pat in s.sources):
                problems.append(f"{src} is a test and matches `sources` in "
                                f"{MAPPING}: keep it in `tests` only")
    return set(seen), problems


def _new_file_diffs(root: Path, pairs: list[tuple[str, str]]) -> list[FileDiff]:
    diffs = []
    for src, dst in pairs:
        full = root / src
        text = new_file_diff(dst, full.read_bytes(), os.access(full, os.X_OK))
        diffs.extend(split_file_diffs(text, src))
    return diffs


def _build_patch(root: Path, spec: PatchSpec, sources: list[str]
                 ) -> tuple[BuiltPatch, list[str]]:
    problems = []
    tests = [(s, d) for s, d in spec.tests if (root / s).is_file()]
    new_files = _new_file_diffs(root, [(p, p) for p in sources] + tests)
    edits: list[FileDiff] = []
    if spec.edits:
        edit_path = root / "patches" / spec.edits
        if edit_path.is_file():
            edits = split_file_diffs(edit_path.read_text(), f"patches/{spec.edits}")
        else:
            problems.append(f"{spec.filename}: edits file patches/{spec.edits} "
                            "is missing")
    missing = [r for r in spec.requires if not (root / r).exists()]
    pending = None
    if missing:
        pending = "waiting for " + ", ".join(missing)
    elif not new_files and not edits:
        pending = "no sources yet"
    return BuiltPatch(spec, new_files, edits, pending), problems


def _test_problems(root: Path, patch: BuiltPatch,
                   notes: list[str]) -> list[str]:
    """Each patch in the series carries its own tests: a mapped test file
    that does not exist, or no test at all, fails (a pending patch only gets
    a note)."""
    spec = patch.spec
    missing = [src for src, _ in spec.tests if not (root / src).is_file()]
    problems = []
    if missing:
        message = (f"{spec.filename}: test file(s) {', '.join(missing)} "
                   f"named in {MAPPING} do not exist")
        problems.append(message)
    if not spec.tests:
        problems.append(f"{spec.filename} carries no tests: add its test "
                        f"files to `tests` in {MAPPING}")
    if patch.pending is not None:
        notes.extend(problems)
        return []
    return problems


def build_series(root: Path = REPO) -> Series:
    """Reads the mapping and the sources; returns the series in memory."""
    upstream = load_upstream(root)
    meta, specs = load_specs(root)
    aten_tests, problems = _aten_tests(specs)
    owned, more = _match_sources(
        [p for p in _tracked_files(root, SOURCE_ROOT) if p not in aten_tests],
        specs)
    problems.extend(more)
    notes = []
    mapped_tests = {src for s in specs for src, _ in s.tests}
    mapped_tests.update(meta.get("not_upstream", []))
    for path in _tracked_files(root, TEST_ROOT):
        if path.endswith(".py") and path not in mapped_tests:
            notes.append(f"{path} is in no patch (extension/tooling test?)")
    patches = []
    for spec in specs:
        built, extra = _build_patch(root, spec, owned[spec.number])
        problems.extend(extra)
        patches.append(built)
        problems.extend(_test_problems(root, built, notes))
    series = Series(upstream=upstream, author=str(meta.get("author", "")),
                    date=str(meta.get("date", "")), patches=patches,
                    problems=problems, notes=notes,
                    not_verified=str(meta.get("not_verified", "")).strip())
    _take_back_later_edits(root, series)
    return series


def _take_back_later_edits(root: Path, series: Series) -> None:
    """For every file a patch adds and a later patch's edits change, the
    adding patch carries the aten/ (final) text with the later hunks taken
    back out, latest first; the later patch carries the hunks as written.
    A hunk that does not match aten/ is a problem, as is an edit of a file
    that only the same or a later patch adds."""
    added: dict[str, tuple[int, int]] = {}  # path -> (patch index, diff index)
    for i, patch in enumerate(series.patches):
        for k, diff in enumerate(patch.new_files):
            added[diff.path] = (i, k)
    later: dict[str, list[tuple[int, FileDiff]]] = {}
    for j, patch in enumerate(series.patches):
        for diff in patch.edits:
            if diff.path not in added:
                continue
            i, _ = added[diff.path]
            if i >= j:
                series.problems.append(
                    f"{patch.spec.filename}: {diff.origin} edits {diff.path}, "
                    f"which {series.patches[i].spec.filename} adds: change "
                    f"the file under {SOURCE_ROOT} or {TEST_ROOT} instead")
                continue
            later.setdefault(diff.path, []).append((j, diff))
    for path, edits in later.items():
        i, k = added[path]
        first = series.patches[i]
        origin = first.new_files[k].origin
        text = (root / origin).read_text()
        try:
            for j, diff in reversed(edits):
                text = apply_hunks(text, diff, reverse=True)
        except HunkMismatch as exc:
            series.problems.append(
                f"{series.patches[j].spec.filename}: {diff.origin}: hunk "
                f"{exc} does not match {origin}, the file after the whole "
                "series: its context and '+' lines must read as that file "
                "does now")
            continue
        for j, diff in edits:
            if series.patches[j].pending is not None:
                series.notes.append(
                    f"{first.spec.filename} carries {path} without the hunks "
                    f"of pending {series.patches[j].spec.filename}")
            series.series_hunks.update(
                (series.patches[j].spec.filename, diff.path + h.header)
                for h in diff.hunks)
        executable = os.access(root / origin, os.X_OK)
        regenerated = split_file_diffs(
            new_file_diff(path, text.encode("utf-8"), executable), origin)
        first.new_files[k] = regenerated[0]


def _diffstat(diffs: list[FileDiff]) -> str:
    if not diffs:
        return ""
    width = max(len(d.path) for d in diffs)
    lines = []
    for d in diffs:
        changes = d.added + d.removed
        scale = min(1.0, 40 / changes) if changes else 1.0
        bar = "+" * round(d.added * scale) + "-" * round(d.removed * scale)
        lines.append(f" {d.path.ljust(width)} | {changes:4d} {bar}".rstrip())
    added = sum(d.added for d in diffs)
    removed = sum(d.removed for d in diffs)
    lines.append(f" {len(diffs)} files changed, {added} insertions(+), "
                 f"{removed} deletions(-)")
    for d in diffs:
        mode = re.search(r"^new file mode (\d+)$", d.text, re.M)
        if mode:
            lines.append(f" create mode {mode.group(1)} {d.path}")
    return "\n".join(lines) + "\n"


def commit_message(patch: BuiltPatch) -> str:
    """Subject line, blank line, body: what ``git am`` records."""
    spec = patch.spec
    body = [spec.motivation] if spec.motivation else []
    if spec.test_plan:
        body.append("Test plan:\n" + spec.test_plan)
    return spec.subject + "\n\n" + "\n\n".join(body) + "\n"


def render_patch(series: Series, patch: BuiltPatch,
                 prefix: str = "[PATCH]") -> str:
    """The ``git format-patch`` text of one patch."""
    message = commit_message(patch)
    subject, _, body = message.partition("\n\n")
    head = ("From 0000000000000000000000000000000000000000 "
            "Mon Sep 17 00:00:00 2001\n"
            f"From: {series.author}\n")
    if series.date:
        head += f"Date: {series.date}\n"
    head += f"Subject: {prefix} {subject}\n\n{body}---\n"
    diffs = "".join(d.text for d in patch.file_diffs)
    return (head + _diffstat(patch.file_diffs) + "\n" + diffs
            + "-- \ngenerated by tools/patches/sync_patches.py\n\n")


def expected_outputs(series: Series) -> dict[str, str]:
    """Every generated file under patches/, keyed by repo-relative path."""
    out = {}
    names = []
    for patch in series.emitted:
        name = patch.spec.filename
        names.append(name)
        out[f"patches/{name}"] = render_patch(series, patch)
    header = (f"# Patch series against PyTorch {series.upstream.tag} "
              f"({series.upstream.commit}).\n"
              "# Generated by tools/patches/sync_patches.py from patches/files.toml; "
              "apply in this order.\n")
    out[SERIES] = header + "".join(n + "\n" for n in names)
    return out


def generated_on_disk(root: Path = REPO) -> list[str]:
    """Patch files and the series file currently under patches/."""
    found = sorted(p.relative_to(root).as_posix()
                   for p in (root / "patches").glob("[0-9][0-9][0-9][0-9]-*.patch"))
    if (root / SERIES).exists():
        found.append(SERIES)
    return found
