#!/usr/bin/env python3
"""Fails when the crate's top-level modules import each other in a cycle.

usage: module_cycles.py [SRC_DIR]   (default: src)

A top-level module is the first path component under src/ (file stem or directory name;
lib.rs and main.rs are not modules). Module A depends on module B when code in A names
`crate::B` (a `use crate::...` line, a `use crate::{B, ...}` group or an inline path).
Comments, string literals and `#[cfg(test)]` items are left out: tests may reach sideways.

Prints one line per module ("module -> a, b, c"), then each cycle (a strongly connected
component of more than one module) with one reference per edge inside it, and exits 1 when
there is any.
"""

import pathlib
import re
import sys


def strip_comments_and_strings(text):
    """Blanks out comments and string/char literals, keeping newlines so line numbers hold."""
    out = []
    i, n = 0, len(text)

    def blank(s):
        out.append(re.sub(r"[^\n]", " ", s))

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(text[i:j])
            i = j
        elif text.startswith("/*", i):
            # Block comments nest in Rust.
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(text[i:j])
            i = j
        elif m := re.match(r'b?r(#*)"', text[i:i + 260]):
            # Raw string: ends at a quote followed by the same number of #.
            end = text.find('"' + m.group(1), i + m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            blank(text[i:j])
            i = j
        elif c == '"' and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(text[i:j + 1])
            i = j + 1
        elif c == "'" and (m := re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])):
            # A char literal; a lone quote is a lifetime and stays.
            blank(m.group(0))
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_cfg_test(text):
    """Blanks out every item under `#[cfg(test)]`: up to its `;`, or its whole `{...}` block."""
    while m := re.search(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]", text):
        i, depth = m.end(), 0
        while i < len(text):
            c = text[i]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
            elif c == ";" and depth == 0:
                break
            i += 1
        text = text[:m.start()] + re.sub(r"[^\n]", " ", text[m.start():i + 1]) + text[i + 1:]
    return text


def group_heads(text, start):
    """First path segment of each top-level item of the `{...}` group opening at `start`."""
    heads, depth, item = [], 0, ""
    for c in text[start:]:
        if c == "{":
            depth += 1
            if depth == 1:
                continue
        elif c == "}":
            depth -= 1
            if depth == 0:
                heads.append(item)
                break
        if depth == 1 and c == ",":
            heads.append(item)
            item = ""
        elif depth >= 1:
            item += c
    return [m.group(0) for h in heads if (m := re.match(r"\w+", h.strip()))]


def references(text):
    """(module name, offset) of every `crate::name` in the code."""
    for m in re.finditer(r"(?<![\w$])crate\s*::\s*(\{|\w+)", text):
        if m.group(1) == "{":
            for head in group_heads(text, m.start(1)):
                yield head, m.start()
        else:
            yield m.group(1), m.start()


def module_graph(src):
    files = {}
    for f in sorted(src.rglob("*.rs")):
        parts = f.relative_to(src).parts
        top = parts[0][:-3] if len(parts) == 1 else parts[0]
        if top not in ("lib", "main"):
            files.setdefault(top, []).append(f)
    graph = {m: set() for m in files}
    where = {}  # (from, to) -> first "file:line" naming it
    for module, paths in files.items():
        for f in paths:
            text = strip_cfg_test(strip_comments_and_strings(f.read_text()))
            for name, offset in references(text):
                if name in graph and name != module:
                    graph[module].add(name)
                    line = text.count("\n", 0, offset) + 1
                    where.setdefault((module, name), f"{f}:{line}")
    return graph, where


def components(graph):
    """Strongly connected components (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main():
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "src")
    graph, where = module_graph(src)
    for m in sorted(graph):
        print(f"{m} -> {', '.join(sorted(graph[m])) or '(none)'}")
    cycles = [c for c in components(graph) if len(c) > 1]
    for comp in cycles:
        print(f"cycle: {', '.join(comp)}")
        for a in comp:
            for b in sorted(graph[a] & set(comp)):
                print(f"  {a} -> {b}  ({where[(a, b)]})")
    sys.exit(1 if cycles else 0)


if __name__ == "__main__":
    main()
