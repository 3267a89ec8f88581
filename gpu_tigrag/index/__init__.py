"""The base index's stages (token co-occurrence graph, BM25, embeddings, entities), the index container
and its on-disk format."""
