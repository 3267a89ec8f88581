"""Evaluation: query files with gold evidence, recall@k as HippoRAG defines it."""
