"""No import circle anywhere in the tree (issue 31): every module of the shared library and of
each service can be read, and tested, after the modules it imports and never before them.

The graph is built by grimp (import-linter's own graph library) over the five packages at
once, so a circle through two packages would show as well. Imports under ``if TYPE_CHECKING:``
count: a module that names another's type still depends on it to be understood, and a circle
of annotations is the same tangle of layers as one of calls (none is needed today). A circle
is reported as the chain of modules that closes it.
"""

from __future__ import annotations

import functools

import grimp
import pytest

PACKAGES = (
    "yak",
    "yak_broker",
    "yak_coordinator",
    "yak_rest_proxy",
    "yak_console",
    "yak_schema_registry",
)


@functools.cache
def _graph() -> grimp.ImportGraph:
    return grimp.build_graph(
        *PACKAGES, include_external_packages=False, exclude_type_checking_imports=False
    )


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of two or more modules that import each other, directly or not (Tarjan's
    algorithm, iterative: the graph is deeper than Python's recursion limit allows)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return groups


def cycles_of(graph: grimp.ImportGraph, package: str) -> list[str]:
    """Each circle touching ``package``, as ``a -> b -> ... -> a``."""
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    found = []
    for group in strongly_connected(edges):
        if not any(m == package or m.startswith(package + ".") for m in group):
            continue
        start = group[0]
        back = min(
            (graph.find_shortest_chain(importer=nxt, imported=start) or (nxt, start))
            for nxt in sorted(edges[start] & set(group))
        )
        found.append(" -> ".join((start, *back)))
    return found


def test_strongly_connected_finds_a_circle_and_nothing_else() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": set()}
    assert strongly_connected(edges) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle(package: str) -> None:
    assert cycles_of(_graph(), package) == []
