"""Statistics of the token co-occurrence graph, as in the TIGRAG paper's Table 1."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse
from scipy.sparse.csgraph import connected_components


def graph_statistics(adjacency: scipy.sparse.csr_matrix, bm25: scipy.sparse.csr_matrix) -> dict[str, Any]:
    """Nodes, edges, average degree, chunks per node, chunks, density, connected components."""
    n_nodes = adjacency.shape[0]
    n_edges = int(adjacency.nnz // 2)  # symmetric, no self-loops
    docs_per_node = np.bincount(bm25.indices, minlength=n_nodes)
    n_components, _ = connected_components(adjacency, directed=False)
    isolated = int(np.count_nonzero(np.diff(adjacency.indptr) == 0))
    return {
        "nodes": int(n_nodes),
        "edges": n_edges,
        "average_degree": 2.0 * n_edges / n_nodes if n_nodes else 0.0,
        "average_documents_per_node": float(docs_per_node.mean()) if n_nodes else 0.0,
        "chunks": int(bm25.shape[0]),
        "density": 2.0 * n_edges / (n_nodes * (n_nodes - 1)) if n_nodes > 1 else 0.0,
        "connected_components": int(n_components),
        "isolated_nodes": isolated,
    }


def format_statistics(stats: dict[str, Any]) -> str:
    rows = [
        ("Number of nodes", f"{stats['nodes']:,}"),
        ("Number of edges", f"{stats['edges']:,}"),
        ("Average degree", f"{stats['average_degree']:.2f}"),
        ("Average number of documents per node", f"{stats['average_documents_per_node']:.2f}"),
        ("Number of chunks", f"{stats['chunks']:,}"),
        ("Density", f"{stats['density']:.4f}"),
        ("Number of connected components", f"{stats['connected_components']:,}"),
        ("  of which isolated nodes", f"{stats['isolated_nodes']:,}"),
    ]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{name:<{width}}  {value:>12}" for name, value in rows)
