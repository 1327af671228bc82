#!/usr/bin/env python3
"""Checks the source layout of every crate:

* no source file under `crates/*/src/` is longer than MAX_LINES lines;
* no two source files import each other, directly or round a loop: within
  each crate, a file's `use crate::…`, `use super::…` and qualified
  `crate::…` paths are edges to the files that define those modules, and
  the graph of edges between files that are not each other's ancestor must
  have no cycle. A module and its own submodules (`mod.rs` and the files
  under it) may refer to each other: that is one room.

Usage: scripts/check_layout.py [crates-dir]   (exit status 1 on a finding)
"""

import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
MAX_LINES = 400


def module_of(src, path):
    """The module path of a file under `src` (a tuple of names)."""
    rel = os.path.relpath(path, src)[: -len(".rs")].split(os.sep)
    if rel[-1] in ("lib", "main") and len(rel) == 1:
        return ()
    if rel[-1] == "mod":
        rel = rel[:-1]
    return tuple(rel)


def strip(text):
    """The text without comments, string literals and `#[cfg(test)]` modules."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'r#*"(?:[^"\\]|\\.)*"#*', '""', text)
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    test = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*\{", text)
    if test:
        text = text[: test.start()]
    return text


def expand(tree):
    """The paths of a `use` tree, e.g. `a::{b, c::{d, e}}` -> a::b, a::c::d, a::c::e."""
    tree = tree.strip()
    depth, split = 0, None
    for i, ch in enumerate(tree):
        if ch == "{":
            if depth == 0 and split is None:
                split = i
            depth += 1
        elif ch == "}":
            depth -= 1
    if split is None:
        return [re.sub(r"\s+as\s+" + IDENT + "$", "", tree).strip()]
    prefix, inner = tree[:split], tree[split + 1 : tree.rindex("}")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    out = []
    for part in parts:
        if part.strip():
            out += [prefix + p for p in expand(part)]
    return out


def references(text, module, is_dir_module):
    """Absolute module paths `text` (in `module`) refers to."""
    paths = []
    for tree in re.findall(r"\buse\s+([^;]+);", text):
        paths += expand(tree)
    paths += re.findall(r"(?<![A-Za-z0-9_:])((?:crate|super)(?:::" + IDENT + r")+)", text)
    out = []
    for path in paths:
        parts = [p for p in path.replace(" ", "").split("::") if p]
        if not parts or parts[0] not in ("crate", "super", "self"):
            continue
        if parts[0] == "crate":
            base, rest = [], parts[1:]
        else:
            # `super` of a file module is its parent; of `mod.rs`, the parent too.
            base = list(module)
            rest = parts
            while rest and rest[0] in ("super", "self"):
                if rest[0] == "super":
                    base = base[:-1]
                rest = rest[1:]
        out.append(tuple(base + [r for r in rest if r not in ("*", "self")]))
    return out


def check(crate_src):
    files = {}
    for root, _, names in os.walk(crate_src):
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(root, name)
                files[module_of(crate_src, path)] = path
    edges = {m: set() for m in files}
    for module, path in files.items():
        with open(path, encoding="utf-8") as f:
            text = strip(f.read())
        for target in references(text, module, path.endswith("mod.rs")):
            # The file defining the longest prefix of the path.
            while target and target not in files:
                target = target[:-1]
            if target == module or target not in files:
                continue
            if target[: len(module)] == module or module[: len(target)] == target:
                continue  # an ancestor and its descendant: one room
            edges[module].add(target)
    # Tarjan's strongly connected components.
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(scc)

    sys.setrecursionlimit(10000)
    for v in sorted(files):
        if v not in index:
            visit(v)
    return [[os.path.relpath(files[m]) for m in sorted(scc)] for scc in sccs]


def long_files(src):
    """Files under `src` longer than MAX_LINES, with their lengths."""
    out = []
    for root, _, names in os.walk(src):
        for name in sorted(names):
            if name.endswith(".rs"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    count = sum(1 for _ in f)
                if count > MAX_LINES:
                    out.append((os.path.relpath(path), count))
    return out


def main():
    crates = sys.argv[1] if len(sys.argv) > 1 else "crates"
    cycles, long = [], []
    for crate in sorted(os.listdir(crates)):
        src = os.path.join(crates, crate, "src")
        if os.path.isdir(src):
            cycles += check(src)
            long += long_files(src)
    for cycle in cycles:
        print("import cycle between files: " + " <-> ".join(cycle))
    for path, count in long:
        print(f"{path}: {count} lines, more than {MAX_LINES}: split it by concern")
    if cycles or long:
        sys.exit(1)
    print(f"no import cycles between source files; none longer than {MAX_LINES} lines")


if __name__ == "__main__":
    main()
