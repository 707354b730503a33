"""ARCHITECTURE.md and README.md name only what the repository has.

Every repository path written in backticks or in a fenced block (``rocketpy/...``, ``tests/...``,
``conf/...``, ``bin/...``, ``analytics/...``, a root file such as ``pyproject.toml``) exists,
every dotted ``rocketpy.``/``analytics.`` name resolves to a module or a name defined in one,
and every ``make <target>`` is a target of the Makefile. A ``<placeholder>`` or ``*`` in a path
must match at least one file. Runtime paths (``.cluster/...``, ``~/logs/...``, store files such
as ``config/*.json``) are not repository paths and are not checked.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("ARCHITECTURE.md", "README.md")
#: First path segments that are repository directories.
TOP_DIRS = frozenset({"rocketpy", "tests", "conf", "bin", "analytics"})
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_INLINE = re.compile(r"`([^`\n]+)`")
_ROOT_FILE = re.compile(r"^(?:[\w.-]+\.(?:md|toml)|Makefile)$")
_DOTTED = re.compile(r"^(?:rocketpy|analytics)(?:\.\w+)+$")
_TARGET = re.compile(r"^([A-Za-z][\w-]*)\s*:(?!=)", re.MULTILINE)
_STRIP = "\"'.,;:()[]"


def spans(text: str) -> list[str]:
    """Inline code spans outside fenced blocks, and each fenced line without its comment."""
    found: list[str] = []
    for block in _FENCE.findall(text):
        found.extend(line.split(" #", 1)[0] for line in block.splitlines())
    found.extend(_INLINE.findall(_FENCE.sub("", text)))
    return found


def _tokens(span: str) -> list[str]:
    return [t.strip(_STRIP) for t in span.split()]


def _path_exists(token: str) -> bool:
    pattern = re.sub(r"<[^>]*>", "*", token)
    if "*" in pattern:
        return any(ROOT.glob(pattern.rstrip("/")))
    return (ROOT / pattern).exists()


def _dotted_exists(name: str) -> bool:
    """A module (file or package) of the repository, or a name a module defines."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        module = base.with_suffix(".py")
        if not module.is_file():
            module = base / "__init__.py"
        if not module.is_file():
            continue
        rest = parts[cut:]
        if not rest:
            return True
        source = module.read_text(encoding="utf-8")
        defined = rf"^\s*(?:class|def|async def)\s+{rest[0]}\b|^{rest[0]}\s*[:=]"
        return re.search(defined, source, re.MULTILINE) is not None
    return False


def makefile_targets() -> frozenset[str]:
    """Rule targets of the Makefile (variable assignments excluded)."""
    return frozenset(_TARGET.findall((ROOT / "Makefile").read_text(encoding="utf-8")))


def make_targets_named(text: str) -> set[str]:
    """Targets named as ``make <target>`` (``VAR=value`` arguments and flags skipped)."""
    named: set[str] = set()
    for span in spans(text):
        words = _tokens(span)
        for i, word in enumerate(words):
            if word != "make":
                continue
            for arg in words[i + 1 :]:
                if "=" in arg or arg.startswith("-"):
                    continue
                named.add(arg)
                break
    return named


def repository_paths(text: str) -> set[str]:
    """Repository paths and dotted module names written in code spans or blocks."""
    paths: set[str] = set()
    for span in spans(text):
        for token in _tokens(span):
            in_repo_dir = "/" in token and token.split("/", 1)[0] in TOP_DIRS
            dotted = _DOTTED.match(token) is not None and "<" not in token
            if in_repo_dir or dotted or _ROOT_FILE.match(token):
                paths.add(token)
    return paths


def missing(text: str) -> list[str]:
    """What ``text`` names that the repository does not have."""
    gone = []
    for token in sorted(repository_paths(text)):
        exists = _dotted_exists(token) if _DOTTED.match(token) else _path_exists(token)
        if not exists:
            gone.append(token)
    targets = makefile_targets()
    gone.extend(f"make {t}" for t in sorted(make_targets_named(text) - targets))
    return gone


@pytest.mark.parametrize("doc", DOCS)
def test_docs_name_only_existing_paths_and_targets(doc: str) -> None:
    """1. Read the document. 2. Collect its repository paths, module names and make targets.
    Expected: each exists (a path or name that moved must be fixed in the document)."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert missing(text) == []


def test_docs_architecture_is_checked_at_all() -> None:
    """1. Collect ARCHITECTURE.md's paths and make targets.
    Expected: dozens of paths and several targets (a broken extractor would pass vacuously)."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert len(repository_paths(text)) > 50
    assert {"test-unit", "test-int", "imports"} <= make_targets_named(text)


def test_docs_check_reports_what_does_not_exist() -> None:
    """1. A text naming a missing module path, a missing glob, a missing dotted name, a file
    outside the repository and a missing make target, beside ones that exist.
    Expected: exactly the missing ones are reported."""
    text = (
        "See `rocketpy/store/no_such_module.py` and `rocketpy/common/codes.py`, "
        "`conf/<layout>/nothing.conf` and `conf/<layout>/broker-a.properties`, "
        "`rocketpy.common.codes.NoSuchCode` and `rocketpy.common.codes.RequestCode`, "
        "`STYLE.md` and `pyproject.toml`.\n\n"
        "```bash\nmake no-such-target   # comment: make nothing\nmake BASE_PORT=0 cluster\n```\n"
    )
    assert missing(text) == [
        "STYLE.md",
        "conf/<layout>/nothing.conf",
        "rocketpy.common.codes.NoSuchCode",
        "rocketpy/store/no_such_module.py",
        "make no-such-target",
    ]
