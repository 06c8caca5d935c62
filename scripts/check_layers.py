#!/usr/bin/python3
"""Checks that every source file includes only what its layer may use.

The rules are in src/layers.txt (the one source of truth; its header says the format).
Scans src/, sim/ and bench/ (*.h, *.cc, *.hpp, *.cpp) and prints one line per violation:

    src/cluster/x.cc:12 includes env/real_env.h; layer cluster may use base env store

Besides the includes it refuses: a glob of src/layers.txt that matches no file (a stale
row); a cycle among the layers' MAY-USE edges (an edge that runs up the layers); and, with
--targets FILE (written by the top-level CMakeLists.txt: one line per CMake target, its
name then its source files), a target whose non-test sources lie in more than one layer.
CMake runs this at configure time and as a build step (target wk_layers), so a violation
fails the build, not only the tests.

Exit status: 0 when the tree is clean, 1 on violations, 2 when the rules cannot be read.

--self-test copies the tree into a temporary directory, adds deliberate violations
(a real-runtime header in cluster code, a thread in the replica, the server in the
simulator, an unknown external header) and expects exactly those to be reported; it
fails when the check misses one, reports something else, or the copy is not clean first.

Standard library and python3 only (Debian's /usr/bin/python3).
"""

import argparse
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile

SCANNED_DIRS = ("src", "sim", "bench")
SOURCE_EXTS = (".h", ".cc", ".hpp", ".cpp")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


class RulesError(Exception):
    pass


def glob_match(path, pattern):
    """fnmatch where `*` does not cross a `/`."""
    regex = "".join("[^/]*" if c == "*" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, path) is not None


class Rules:
    def __init__(self, text, source):
        self.layers = []     # (name, globs, may_use set), in file order
        self.externals = []  # (name, patterns), in file order
        self.extras = []     # (globs, may_use set)
        self.known = {}      # (file, header as printed) -> line of the rules file
        names = set()
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = [p.strip() for p in line.split(":")]
            head = parts[0].split()
            where = f"{source}:{lineno}"
            if head[0] == "layer" and len(head) == 2 and len(parts) == 3:
                name, globs, uses = head[1], parts[1].split(), set(parts[2].split())
                if not globs:
                    raise RulesError(f"{where}: layer {name} names no files")
                self.layers.append((name, globs, uses))
                names.add(name)
            elif head[0] == "external" and len(head) == 2 and len(parts) == 2:
                if head[1] in names:
                    raise RulesError(f"{where}: {head[1]} is defined twice")
                self.externals.append((head[1], parts[1].split()))
                names.add(head[1])
            elif head[0] == "extra" and len(head) >= 2 and len(parts) == 2:
                self.extras.append((head[1:], set(parts[1].split())))
            elif head[0] == "known" and len(head) == 2 and len(parts) == 2:
                for header in parts[1].split():
                    self.known[(head[1], header)] = where
            else:
                raise RulesError(f"{where}: expected `layer NAME : GLOBS : USES`, "
                                 f"`external NAME : PATTERNS`, `extra GLOBS : USES` or `known FILE : HEADERS`")
        # `*` in MAY-USE: every layer and external group; `-NAME` then takes one away.
        def expand(uses):
            out = set(names) if "*" in uses else set()
            out |= {u for u in uses if u != "*" and not u.startswith("-")}
            return out - {u[1:] for u in uses if u.startswith("-")}
        self.layers = [(n, g, expand(u)) for n, g, u in self.layers]
        self.everything = set(names)
        self.extras = [(g, expand(u)) for g, u in self.extras]
        for name, _, uses in self.layers:
            for use in uses - names:
                raise RulesError(f"{source}: layer {name} may use {use}, which is no layer or external group")
        for _, uses in self.extras:
            for use in uses - names:
                raise RulesError(f"{source}: an extra row names {use}, which is no layer or external group")

    def layer_of(self, path):
        for name, globs, uses in self.layers:
            if any(glob_match(path, g) for g in globs):
                return name, uses
        return None, None

    def allowed(self, path):
        name, uses = self.layer_of(path)
        if name is None:
            return None, None, None
        allowed = set(uses) | {name}
        for globs, extra in self.extras:
            if any(glob_match(path, g) for g in globs):
                allowed |= extra
        return name, uses, allowed

    def external_group(self, header):
        for name, patterns in self.externals:
            if any(fnmatch.fnmatchcase(header, p) for p in patterns):
                return name
        if "/" not in header and "." not in header:
            return "std"  # an extension-less standard header no group names
        return None


def resolve_quoted(root, including, header):
    """The repository path a quoted include names, or None."""
    candidates = [os.path.join(os.path.dirname(including), header), os.path.join("src", header)]
    if including.startswith("sim/"):
        candidates.append(os.path.join("sim", header))
    for c in candidates:
        c = os.path.normpath(c)
        if os.path.isfile(os.path.join(root, c)):
            return c
        # A header CMake generates from a template (configure_file), e.g. base/version.h.
        if os.path.isfile(os.path.join(root, c + ".in")):
            return c
    return None


def source_files(root):
    for top in SCANNED_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if d not in ("testdata",))
            for f in sorted(filenames):
                if f.endswith(SOURCE_EXTS):
                    yield os.path.relpath(os.path.join(dirpath, f), root)


def stale_globs(rules, files, rules_name):
    """Globs of layer and extra rows that match no scanned file."""
    out = []
    for name, globs, _ in rules.layers:
        for g in globs:
            if not any(glob_match(f, g) for f in files):
                out.append(f"{rules_name}: layer {name}'s glob {g} matches no file; delete or fix it")
    for globs, _ in rules.extras:
        for g in globs:
            if not any(glob_match(f, g) for f in files):
                out.append(f"{rules_name}: an extra row's glob {g} matches no file; delete or fix it")
    return out


def layer_cycles(rules, rules_name):
    """A cycle among the layers' MAY-USE edges, as one message (or none)."""
    layer_names = [n for n, _, _ in rules.layers]
    edges = {n: sorted(u & set(layer_names)) for n, _, u in rules.layers}
    state = {}  # name -> 1 on the stack, 2 done
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in edges.get(n, []):
            if m == n:
                continue
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in layer_names:
        if n not in state:
            found = visit(n)
            if found:
                return [f"{rules_name}: the layers use each other in a cycle: " + " -> ".join(found)]
    return []


def target_layers(rules, root, targets_path):
    """Targets whose non-test sources belong to more than one layer."""
    out = []
    with open(targets_path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 2:
                continue
            target, sources = parts[0], parts[1:]
            layers = {}
            for src in sources:
                rel = os.path.relpath(src, root) if os.path.isabs(src) else src
                if rel.startswith("..") or rel.endswith("_test.cc") or not rel.endswith(SOURCE_EXTS):
                    continue  # generated, a test, or outside the scanned tree
                if not rel.startswith(tuple(d + "/" for d in SCANNED_DIRS)):
                    continue
                name, _ = rules.layer_of(rel)
                layers.setdefault(name, []).append(rel)
            if len(layers) > 1:
                detail = "; ".join(f"{n}: {' '.join(sorted(fs))}" for n, fs in sorted(layers.items(), key=str))
                out.append(f"CMake target {target} mixes layers ({detail}); one target, one layer")
    return out


def check(root, rules_path, targets_path=None):
    """Returns (violations, known): the lines to print."""
    with open(rules_path, encoding="utf-8") as f:
        rules = Rules(f.read(), os.path.relpath(rules_path, root))
    rules_name = os.path.relpath(rules_path, root)
    files = list(source_files(root))
    violations = stale_globs(rules, files, rules_name) + layer_cycles(rules, rules_name)
    if targets_path:
        violations += target_layers(rules, root, targets_path)
    known = []
    unused_known = dict(rules.known)
    for path in files:
        name, uses, allowed = rules.allowed(path)
        if name is None:
            violations.append(f"{path}:1 belongs to no layer; add it to {os.path.relpath(rules_path, root)}")
            continue
        may_use = (" ".join(sorted(uses)) if len(uses) < 12 else
                   "everything but " + " ".join(sorted(rules.everything - uses - {name})))
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                quote, header = m.groups()
                if quote == '"':
                    target = resolve_quoted(root, path, header)
                    if target is None:
                        violations.append(f"{path}:{lineno} includes {header}, which is not in the repository")
                        continue
                    used, _ = rules.layer_of(target)
                    if used is None:
                        continue  # reported when the target itself is checked
                else:
                    used = rules.external_group(header)
                    if used is None:
                        violations.append(f"{path}:{lineno} includes <{header}>, which no external group of "
                                          f"{os.path.relpath(rules_path, root)} names")
                        continue
                    if used == "std":
                        continue
                    header = f"<{header}>"
                if used not in allowed:
                    message = f"{path}:{lineno} includes {header} ({used}); layer {name} may use {may_use}"
                    if (path, header) in rules.known:
                        unused_known.pop((path, header), None)
                        known.append(f"known: {message}")
                    else:
                        violations.append(message)
    for (path, header), where in sorted(unused_known.items()):
        violations.append(f"{where}: the known violation {path} includes {header} is gone; delete the row")
    return violations, known


def self_test(root):
    """Runs the check over a copy of the tree with deliberate violations."""
    injected = [
        # (file, line to add, text expected in the report)
        ("src/cluster/membership.cc", '#include "env/real_env.h"', "includes env/real_env.h (env.real); layer cluster"),
        ("src/replica/format.cc", "#include <thread>", "includes <thread> (std-threads); layer replica"),
        ("sim/storage_history.cc", '#include "server/admin_routes.h"', "includes server/admin_routes.h (server); layer sim"),
        ("src/store/object_store.cc", "#include <boost/asio/post.hpp>", "includes <boost/asio/post.hpp> (asio); layer store"),
        ("src/base/status.cc", "#include <unknown_lib/x.h>", "includes <unknown_lib/x.h>, which no external group"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for top in SCANNED_DIRS:
            shutil.copytree(os.path.join(root, top), os.path.join(tmp, top),
                            ignore=shutil.ignore_patterns("testdata"))
        rules = os.path.join(tmp, "src", "layers.txt")
        clean = run_child(tmp, rules)
        if clean.returncode != 0:
            print("self-test: the unmodified copy does not pass:\n" + clean.stdout, end="")
            return 1
        # A stale glob and an upward edge (store may use cluster, which uses store).
        with open(rules, "a", encoding="utf-8") as f:
            f.write("\nextra src/nowhere/*.cc : files\n")
        with open(rules, encoding="utf-8") as f:
            text = f.read()
        with open(rules, "w", encoding="utf-8") as f:
            f.write(re.sub(r"^(layer store +: .*: base env)$", r"\1 cluster", text, count=1, flags=re.M))
        injected = injected + [
            ("src/layers.txt", None, "glob src/nowhere/*.cc matches no file"),
            ("src/layers.txt", None, "the layers use each other in a cycle"),
        ]
        for path, line, _ in injected:
            if line is None:
                continue
            full = os.path.join(tmp, path)
            if not os.path.isfile(full):
                print(f"self-test: {path} is missing; update the self-test's injected files")
                return 1
            with open(full, "a", encoding="utf-8") as f:
                f.write("\n" + line + "\n")
        manifest = os.path.join(tmp, "targets.txt")
        with open(manifest, "w", encoding="utf-8") as f:
            f.write("wk_mixed src/base/status.cc src/env/env.cc\n")
        injected.append(("CMake target wk_mixed", None, "mixes layers"))
        broken = run_child(tmp, rules, manifest)
        ok = broken.returncode == 1
        lines = [l for l in broken.stdout.splitlines() if not l.startswith("known: ")]
        for path, _, expected in injected:
            if not any((l.startswith(path + ":") or l.startswith(path + " ")) and expected in l for l in lines):
                print(f"self-test: the check did not report {path}: {expected}")
                ok = False
        if len(lines) != len(injected):
            print(f"self-test: expected {len(injected)} violations, got {len(lines)}:\n" + broken.stdout, end="")
            ok = False
        print("self-test: " + ("every deliberate violation was reported" if ok else "FAILED"))
        return 0 if ok else 1


def run_child(root, rules, targets=None):
    extra = ["--targets", targets] if targets else []
    return subprocess.run([sys.executable, os.path.abspath(__file__), "--root", root, "--rules", rules] + extra,
                          capture_output=True, text=True, check=False)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=os.path.dirname(here), help="the repository root")
    parser.add_argument("--rules", help="the rules file (default: ROOT/src/layers.txt)")
    parser.add_argument("--targets", help="CMake's target manifest: each target's sources in one layer")
    parser.add_argument("--self-test", action="store_true", help="check that deliberate violations are caught")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    if args.self_test:
        return self_test(root)
    try:
        violations, known = check(root, args.rules or os.path.join(root, "src", "layers.txt"), args.targets)
    except (RulesError, OSError) as e:
        print(f"check_layers: {e}")
        return 2
    for v in violations + known:
        print(v)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
