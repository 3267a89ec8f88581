"""gpu_tigrag: TIGRAG graph-RAG retrieval (token co-occurrence graph, batched PPR,
PPR-weighted BM25, cumulative-mass pooling, embedding rerank, entity-driven multi-hop)
on NumPy/SciPy/Numba or CuPy with one code path."""

__version__ = "0.1.0"
