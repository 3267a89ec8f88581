"""Batched retrieval: graph scoring, pooling, rerank, multi-hop (sections 3.4-3.7)."""
