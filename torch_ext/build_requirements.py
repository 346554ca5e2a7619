"""The requirements torch_ext/pyproject.toml declares, read for build.sh and
setup.py so that they are written down once.

    python3 build_requirements.py GROUP...          # one a line
    python3 build_requirements.py --unmet GROUP...  # only those not met here

GROUP: build (the [build-system] requires), test, bench (the extras).
setup.py stops on unmet build requirements: the build runs without pip's
build isolation, and then pip installs none of them.
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent / "pyproject.toml"


def _toml():
    try:
        import tomllib
    except ImportError:  # Python 3.10: pip carries the same parser
        try:
            import tomli as tomllib
        except ImportError:
            from pip._vendor import tomli as tomllib
    return tomllib


def _requirement_class():
    try:
        from packaging.requirements import Requirement
    except ImportError:
        try:
            from pip._vendor.packaging.requirements import Requirement
        except ImportError:
            return None
    return Requirement


def declared(*groups: str) -> list[str]:
    """The requirement strings of `groups`, in pyproject's order."""
    pyproject = _toml().loads(PYPROJECT.read_text())
    table = dict(pyproject["project"]["optional-dependencies"],
                 build=pyproject["build-system"]["requires"])
    return [req for group in groups for req in table[group]]


def _unmet_one(requirement, text: str) -> str | None:
    try:
        found = importlib.metadata.version(requirement.name)
    except importlib.metadata.PackageNotFoundError:
        return f"{text} (missing)"
    if not requirement.specifier.contains(found, prereleases=True):
        return f"{text} (found {found})"
    return None


def unmet(requirements: list[str]) -> list[str]:
    """Those of `requirements` this Python lacks, each with what it has.
    Without a requirement parser here, every one counts as unmet."""
    parse = _requirement_class()
    if parse is None:
        return [f"{text} (not checked)" for text in requirements]
    found = [_unmet_one(parse(text), text) for text in requirements]
    return [note for note in found if note]


def main(args: list[str]) -> None:
    only_unmet = args[:1] == ["--unmet"]
    listed = declared(*(args[1:] if only_unmet else args))
    if only_unmet:
        listed = [note.rsplit(" (", 1)[0] for note in unmet(listed)]
    print("\n".join(listed))


if __name__ == "__main__":
    main(sys.argv[1:])
