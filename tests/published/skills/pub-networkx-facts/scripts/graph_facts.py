"""Spanning trees of K_n and the corner-to-corner shortest path length of an R x C grid, with NetworkX."""

import argparse
import json
import sys

import networkx as nx


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--complete", type=int, default=5, help="n of the complete graph K_n")
    parser.add_argument("--grid", default="3x3", help="R x C of the grid graph, e.g. 3x4")
    args = parser.parse_args()
    rows, cols = (int(part) for part in args.grid.lower().split("x"))

    complete = nx.complete_graph(args.complete)
    trees = nx.number_of_spanning_trees(complete)
    grid = nx.grid_2d_graph(rows, cols)
    path = nx.shortest_path_length(grid, (0, 0), (rows - 1, cols - 1))
    print(json.dumps({"networkx": nx.__version__, "n": args.complete, "spanning_trees": round(trees),
                      "grid": [rows, cols], "grid_path": path}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
