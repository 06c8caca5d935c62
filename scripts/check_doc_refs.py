#!/usr/bin/python3
"""Checks that every reference to a document in the code and the docs can be followed.

Scans the repository's text files (git's tracked and untracked-but-not-ignored files when
it is a checkout, every file otherwise; never third_party/, build/, node_modules/, lock
files or this script) and prints one line per
reference that points nowhere:

    src/x.h:12: docs/storage.md, "Snapshots": no heading "Snapshots" in docs/storage.md

What counts as a reference, and what must hold for it:

  docs/x.md, any path ending in .md    the file exists. A path starting with a top-level
                                       folder of the repository (docs/, src/, ...) is read
                                       from the root; any other from the citing file's
                                       folder, then from the root, then from docs/ (a doc
                                       names its neighbours by their bare file name). A path
                                       leaving the repository (../) is outside it.
  x.md#anchor, [text](x.md#anchor),    the anchor is a heading's GitHub anchor in x.md
  [text](#anchor)                      (lowercased; characters other than letters, digits,
                                       spaces, '-' and '_' dropped; spaces become '-'; the
                                       second heading of the same anchor gets -1, ...), or
                                       an explicit <a id="..."> / <a name="...">.
  [text](path)                         (markdown files only) the file or folder exists,
                                       relative to the markdown file; http(s) and mailto
                                       links are not checked.
  x.md, "Section" / x.md "Section"     x.md has a heading whose text (markdown markup --
                                       `code`, *emphasis*, [links](..) -- removed, blanks
                                       folded, case ignored, on both sides) is the quoted
                                       text; or starts with it followed by ':', ',', ' (',
                                       ' -', ' --' or an em dash (a heading with a subtitle:
                                       "Drain" names "Drain: the node leaves"); or has it as
                                       a `code` span ("move" names "The `move` scenario").
                                       Every section of x.md, "A", "B" and "C" is checked.
  ../shared/..., spec/ADR-n,           always broken: a document outside the repository,
  design/X.md                          which a reader of it cannot open.

Headings are the ATX headings (# ...) outside fenced code blocks.

Exit status: 0 when every reference resolves, 1 when one does not, 2 on a usage error.

--self-test runs the check over a small made-up tree with one reference of each kind that
holds and one of each kind that does not, and fails unless exactly the broken ones are
reported.

Standard library and python3 only (Debian's /usr/bin/python3).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

SKIPPED_DIRS = ("third_party", "build", "node_modules", ".git")
SKIPPED_NAMES = ("package-lock.json",)
# This script: its header and self-test are made of examples, broken on purpose.
SELF = "scripts/check_doc_refs.py"
TEXT_EXTS = (".h", ".cc", ".c", ".hpp", ".cpp", ".md", ".sh", ".py", ".txt", ".cmake", ".ts",
             ".mjs", ".js", ".wat", ".toml", ".yml", ".yaml", ".json", ".in", ".html", ".css")
TEXT_NAMES = ("CMakeLists.txt", "run")

# A markdown link: [text](target). Targets with blanks (titles) are cut at the blank.
LINK_RE = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# A path to a markdown file, optionally with an anchor, then optionally a quoted section.
MD_REF_RE = re.compile(
    r"(?<![\w./-])((?:\.\./|\./)*(?:[\w.-]+/)*[\w.-]+\.md)(#[\w-]+)?"
    r"(?:(?:,\s*|\s+)\"([^\"\n]+)\")?")
# More sections of the same file: x.md, "A", "B" and "C".
MORE_SECTIONS_RE = re.compile(r"(?:,\s*|\s+and\s+|\s+or\s+)\"([^\"\n]+)\"")
# Documents that are not in the repository, however they are named.
OUTSIDE_RE = re.compile(r"(?<![\w./-])(\.\./shared/[\w./-]*|spec/ADR-[\w.-]*|design/[\w.-]+\.md)")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT_ANCHOR_RE = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
FENCE_RE = re.compile(r"^\s*(```|~~~)")
# What may follow a cited section's text in its heading: a subtitle.
SUBTITLE_SEPARATORS = (":", ",", " (", " --", " \u2014", " - ")


def list_files(root):
    """The repository's text files, as paths relative to root."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True)
        paths = [p for p in out.stdout.decode("utf-8", "replace").split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        paths = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in SKIPPED_DIRS]
            for name in filenames:
                paths.append(os.path.relpath(os.path.join(dirpath, name), root))
    result = []
    for p in paths:
        parts = p.split("/")
        if any(part in SKIPPED_DIRS for part in parts[:-1]) or parts[-1] in SKIPPED_NAMES or p == SELF:
            continue
        if p.endswith(TEXT_EXTS) or parts[-1] in TEXT_NAMES:
            if os.path.isfile(os.path.join(root, p)):
                result.append(p)
    return sorted(result)


def strip_markup(text):
    """A heading's text as it reads: links to their text, code and emphasis marks removed."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "").replace("*", "")
    return " ".join(text.split())


def github_anchor(text):
    slug = strip_markup(text).lower()
    slug = "".join(c for c in slug if c.isalnum() or c in " -_")
    return slug.replace(" ", "-")


class Doc:
    """The headings and anchors of one markdown file."""

    def __init__(self, path):
        self.headings = []
        self.code_spans = []  # per heading: the texts of its `code` spans
        self.anchors = set()
        seen = {}
        fenced = False
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if FENCE_RE.match(line):
                    fenced = not fenced
                    continue
                if fenced:
                    continue
                for explicit in EXPLICIT_ANCHOR_RE.findall(line):
                    self.anchors.add(explicit)
                m = HEADING_RE.match(line)
                if not m:
                    continue
                self.headings.append(strip_markup(m.group(2)))
                self.code_spans.append({" ".join(c.split()).casefold() for c in re.findall(r"`([^`]+)`", m.group(2))})
                slug = github_anchor(m.group(2))
                n = seen.get(slug, 0)
                seen[slug] = n + 1
                self.anchors.add(slug if n == 0 else f"{slug}-{n}")

    def has_section(self, quoted):
        want = strip_markup(quoted).casefold()
        for heading, spans in zip(self.headings, self.code_spans):
            h = heading.casefold()
            if h == want or want in spans:
                return True
            if h.startswith(want) and h[len(want):].startswith(SUBTITLE_SEPARATORS):
                return True
        return False


class Checker:
    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.docs = {}
        self.references = 0  # how many were checked
        self.top_dirs = {d for d in os.listdir(self.root) if os.path.isdir(os.path.join(self.root, d))}

    def doc(self, rel):
        if rel not in self.docs:
            self.docs[rel] = Doc(os.path.join(self.root, rel))
        return self.docs[rel]

    def inside(self, rel):
        return rel == "." or not (rel == ".." or rel.startswith("../"))

    def resolve(self, citing, target):
        """The repository-relative path target names from citing, or None (with why)."""
        here = os.path.dirname(citing)
        first = target.split("/")[0]
        if first in self.top_dirs:
            candidates = [target]
        else:
            candidates = [os.path.join(here, target), target, os.path.join("docs", target)]
        for c in candidates:
            rel = os.path.normpath(c)
            if not self.inside(rel):
                return None, "outside the repository"
            if os.path.exists(os.path.join(self.root, rel)):
                return rel, None
        return None, "no such file in the repository"

    def check_anchor(self, rel, anchor, shown):
        if not rel.endswith(".md"):
            return None
        if anchor not in self.doc(rel).anchors:
            return f"{shown}: no heading with the anchor #{anchor} in {rel}"
        return None

    def check_file(self, path):
        problems = []
        is_md = path.endswith(".md")
        with open(os.path.join(self.root, path), encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        fenced = False
        for number, line in enumerate(lines, 1):
            if is_md and FENCE_RE.match(line):
                fenced = not fenced
            for m in OUTSIDE_RE.finditer(line):
                self.references += 1
                problems.append(f"{path}:{number}: {m.group(1)}: a document outside the repository")
            masked = line
            if is_md and not fenced:
                for m in LINK_RE.finditer(line):
                    problems.extend(self.check_link(path, number, m.group(1)))
                    # Checked as a link: not again as a bare path.
                    masked = masked[:m.start(1)] + " " * (m.end(1) - m.start(1)) + masked[m.end(1):]
            masked = OUTSIDE_RE.sub(lambda m: " " * len(m.group(0)), masked)
            for m in MD_REF_RE.finditer(masked):
                problems.extend(self.check_md_ref(path, number, m, masked))
        return problems

    def check_link(self, path, number, target):
        self.references += 1
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:, ...
            return []
        file_part, _, anchor = target.partition("#")
        if not file_part:
            rel = path
        else:
            rel = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
            if not self.inside(rel):
                return [f"{path}:{number}: {target}: outside the repository"]
            if not os.path.exists(os.path.join(self.root, rel)):
                return [f"{path}:{number}: {target}: no such file in the repository"]
        if anchor:
            problem = self.check_anchor(rel, anchor, target)
            if problem:
                return [f"{path}:{number}: {problem}"]
        return []

    def check_md_ref(self, path, number, m, line):
        self.references += 1
        target, anchor, section = m.group(1), m.group(2), m.group(3)
        shown = m.group(0)
        rel, why = self.resolve(path, target)
        if rel is None:
            return [f"{path}:{number}: {target}: {why}"]
        if anchor:
            problem = self.check_anchor(rel, anchor[1:], target + anchor)
            if problem:
                return [f"{path}:{number}: {problem}"]
        if section is None or not rel.endswith(".md"):
            return []
        sections = [section]
        end = m.end()
        while (more := MORE_SECTIONS_RE.match(line, end)) is not None:
            sections.append(more.group(1))
            end = more.end()
        return [f"{path}:{number}: {target}, \"{s}\": no heading \"{s}\" in {rel}"
                for s in sections if not self.doc(rel).has_section(s)]


# Broken references that today's tree still has, accepted until the change named above each
# row lands: (citing file, the reference as reported). They are printed as `known` and do not
# fail the check; a row that no longer matches anything fails it, so stale rows do not linger.
KNOWN = [
]


def check(root, known=()):
    """(problems, known problems found, known rows that matched nothing, references checked)."""
    checker = Checker(root)
    problems = []
    for path in list_files(root):
        problems.extend(checker.check_file(path))
    matched = set()
    found_known = []
    remaining = []
    for p in problems:
        row = next((k for k in known if p.startswith(k[0] + ":") and f": {k[1]}: " in p), None)
        if row is None:
            remaining.append(p)
        else:
            matched.add(row)
            found_known.append(p)
    return remaining, found_known, [k for k in known if k not in matched], checker.references


SELF_TEST_FILES = {
    "docs/guide.md": (
        "# Guide\n"
        "## Moving actors\n"
        "## Drain: the node leaves\n"
        "## `ttl` and grace\n"
        "## Drain: again\n"
        "```\n# not a heading\n```\n"
        "<a id=\"custom\"></a>\n"
        "See [moving](#moving-actors), [the other](other.md#limits), [folder](../src/), \n"
        "[web](https://example.com/x.md#nothing).\n"
        "Broken: [gone](#not-a-heading), [missing](nothing.md), [up](../../outside.md).\n"
    ),
    "docs/other.md": "# Other\n## Limits\nSee guide.md, \"Drain\", guide.md \"ttl\" and guide.md#ttl-and-grace.\n",
    "src/code.h": (
        "// docs/guide.md#moving-actors docs/guide.md#drain-again docs/guide.md#custom\n"
        "// (docs/guide.md, \"Moving actors\") docs/guide.md \"ttl and grace\" (docs/other.md)\n"
        "// docs/guide.md, \"Drain\"\n"
        "// Broken: docs/guide.md#no-such-anchor (docs/guide.md, \"No such section\")\n"
        "// docs/missing.md design/ARCHITECTURE.md spec/ADR-0020 ../shared/notes.txt\n"
        "// docs/guide.md, \"Not a heading\" docs/guide.md, \"Drain: the\"\n"
        "// docs/guide.md, \"Moving actors\", \"Drain\" and \"Nowhere\"\n"
    ),
}
SELF_TEST_EXPECTED = [
    "docs/guide.md:12: #not-a-heading: no heading with the anchor #not-a-heading in docs/guide.md",
    "docs/guide.md:12: nothing.md: no such file in the repository",
    "docs/guide.md:12: ../../outside.md: outside the repository",
    "src/code.h:4: docs/guide.md#no-such-anchor: no heading with the anchor #no-such-anchor in docs/guide.md",
    "src/code.h:4: docs/guide.md, \"No such section\": no heading \"No such section\" in docs/guide.md",
    "src/code.h:5: design/ARCHITECTURE.md: a document outside the repository",
    "src/code.h:5: spec/ADR-0020: a document outside the repository",
    "src/code.h:5: ../shared/notes.txt: a document outside the repository",
    "src/code.h:5: docs/missing.md: no such file in the repository",
    "src/code.h:6: docs/guide.md, \"Not a heading\": no heading \"Not a heading\" in docs/guide.md",
    "src/code.h:6: docs/guide.md, \"Drain: the\": no heading \"Drain: the\" in docs/guide.md",
    "src/code.h:7: docs/guide.md, \"Nowhere\": no heading \"Nowhere\" in docs/guide.md",
]


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        for rel, text in SELF_TEST_FILES.items():
            os.makedirs(os.path.join(tmp, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(tmp, rel), "w", encoding="utf-8") as f:
                f.write(text)
        got, _, _, _ = check(tmp)
    missed = [e for e in SELF_TEST_EXPECTED if e not in got]
    extra = [g for g in got if g not in SELF_TEST_EXPECTED]
    for e in missed:
        print("self-test: not reported: " + e)
    for g in extra:
        print("self-test: reported but not broken: " + g)
    if missed or extra:
        return 1
    print(f"self-test: ok ({len(SELF_TEST_EXPECTED)} broken references reported, nothing else)")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                        help="the repository's root (default: this script's parent folder)")
    parser.add_argument("--self-test", action="store_true", help="check the checker on a made-up tree")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not os.path.isdir(args.root):
        print(f"no such directory: {args.root}")
        return 2
    problems, known, stale, references = check(args.root, KNOWN)
    for p in known:
        print("known: " + p)
    for p in problems:
        print(p)
    for path, ref in stale:
        print(f"stale KNOWN row in scripts/check_doc_refs.py (nothing matches it; delete it): {path}: {ref}")
    if problems or stale:
        print(f"{len(problems)} of {references} document references broken")
        return 1
    print(f"{references} document references, none broken" + (f" ({len(known)} known)" if known else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
