"""Index stages (graph, BM25, embeddings, entities), the index container and its on-disk format."""
