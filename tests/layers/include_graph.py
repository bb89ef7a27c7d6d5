#!/usr/bin/env python3
"""The layers' include graph (docs/architecture.md, "Layers").

Reads the layers from the top-level CMakeLists.txt (CHORUS_LAYERS and the
folders of each, the table the build uses for its include paths), finds
every #include "folder/..." in the library's sources and counts the
includes between layers. Exit 1 if a file includes a header of a higher
layer; exit 0 and the picture otherwise.

  include_graph.py REPO [--dot]     --dot: the graph in Graphviz' language
"""
import os
import re
import sys


def layers_of(repo):
    text = open(os.path.join(repo, "CMakeLists.txt")).read()
    order = re.search(r"set\(CHORUS_LAYERS ([^)]*)\)", text).group(1).split()
    folders = {}  # include folder name -> (layer, path in the repo)
    for layer in order:
        entries = re.search(r'set\(CHORUS_LAYER_%s "([^"]*)"\)' % layer, text).group(1)
        for entry in entries.split(";"):
            name, path = entry.split("=")
            folders[name] = (layer, path)
    return order, folders


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    if "--help" in sys.argv or len(args) != 1:
        print(__doc__.strip())
        return 0 if "--help" in sys.argv else 2
    repo = args[0]
    order, folders = layers_of(repo)
    rank = {layer: i for i, layer in enumerate(order)}
    edges = {}
    upward = []
    files = 0
    for name, (layer, path) in sorted(folders.items()):
        for directory, _, names in os.walk(os.path.join(repo, path)):
            for file_name in names:
                if not file_name.endswith((".cc", ".hpp", ".h", ".c")):
                    continue
                source = os.path.join(directory, file_name)
                files += 1
                for number, line in enumerate(open(source, errors="replace"), 1):
                    match = re.match(r'\s*#\s*include\s+"([^"/]+)/', line)
                    if not match or match.group(1) not in folders:
                        continue
                    target = folders[match.group(1)][0]
                    edges[(layer, target)] = edges.get((layer, target), 0) + 1
                    if rank[target] > rank[layer]:
                        upward.append("%s:%d: %s (layer %s) includes a header of layer %s: %s" % (
                            os.path.relpath(source, repo), number, name, layer, target, line.strip()))
    if "--dot" in sys.argv:
        print("digraph layers {\n  rankdir=TB;")
        for (source, target), count in sorted(edges.items()):
            if source != target:
                colour = ' color="red"' if rank[target] > rank[source] else ""
                print('  "%s" -> "%s" [label=%d%s];' % (source, target, count, colour))
        print("}")
    else:
        print("layers, top to bottom, with the folders of each and the includes from each to the layers below:")
        for layer in reversed(order):
            names = ", ".join(path for name, (l, path) in sorted(folders.items()) if l == layer)
            below = ", ".join("%s %d" % (t, c) for (s, t), c in sorted(edges.items(), key=lambda e: -rank[e[0][1]])
                              if s == layer and t != layer)
            print("  %-12s %-58s -> %s" % (layer, names, below or "(nothing)"))
    for problem in upward:
        print("UPWARD: " + problem)
    if upward:
        print("include_graph: FAILED, %d includes of a higher layer (%d files read)" % (len(upward), files))
        return 1
    print("include_graph: OK, no include of a higher layer (%d files read)" % files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
