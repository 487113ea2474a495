#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""long_functions.py - list C functions longer than a limit (issue 13: no library function over
120 lines; a function reads as a short driver over named steps).

usage: long_functions.py [--max N] [--exclude PATH ...] DIR_OR_FILE ...
Prints "path:line: name: N lines" for each function over N (default 120) lines, from the line
of its name to its closing brace, and exits 1 when there is any; 0 otherwise.

It relies on the house layout (the one clang-format gives): a function definition's name starts
a line at column 0 or after its return type on the same line, and its closing brace is a "}" at
column 0. Comments, strings and character literals are skipped when counting braces.
"""
import argparse
import os
import re
import sys

DEF = re.compile(r'^(?:[A-Za-z_][\w \t\*]*?[\s\*])?([A-Za-z_]\w*)\s*\(')
NOT_FUNCS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else"}


def strip_code(text):
    """Text with comments, strings and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, length in lines) of each function defined in path."""
    lines = strip_code(open(path, encoding="utf-8", errors="replace").read()).split("\n")
    found, depth, start, name = [], 0, None, None
    for k, line in enumerate(lines):
        if depth == 0 and start is None and line[:1] not in ("", " ", "\t", "#", "}", "{"):
            m = DEF.match(line)
            if m and m.group(1) not in NOT_FUNCS and not line.rstrip().endswith(";"):
                start, name = k, m.group(1)
        for ch in line:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
        if start is not None and depth == 0 and line.startswith("}"):
            found.append((name, start + 1, k - start + 1))
            start = name = None
        elif start is not None and depth == 0 and line.rstrip().endswith(";"):
            start = name = None  # a prototype spread over lines
    return found


def c_files(paths, exclude):
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                for f in sorted(names):
                    if f.endswith(".c"):
                        yield os.path.join(root, f)
        elif p.endswith(".c"):
            yield p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max", type=int, default=120)
    ap.add_argument("--exclude", action="append", default=[], help="a file to skip")
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    excl = {os.path.normpath(x) for x in a.exclude}
    bad = 0
    for f in c_files(a.paths, excl):
        if os.path.normpath(f) in excl:
            continue
        for name, line, n in functions(f):
            if n > a.max:
                print(f"{f}:{line}: {name}: {n} lines")
                bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
