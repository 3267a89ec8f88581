"""The baselines as methods: NaiveRAG (dense cosine), BM25 and Hybrid (RRF of the two), on the base
index's chunks, embeddings and BM25 (no stage of their own, no settings)."""

from ..registry import Method, System, register

_RETRIEVERS = __name__ + ".retriever"

for _name, _label, _class, _description in (
    ("naiverag", "NaiveRAG", "NaiveragRetriever", "every chunk by its cosine to the query"),
    ("bm25", "BM25", "Bm25Retriever", "BM25 of the query's valid tokens"),
    ("hybrid", "Hybrid", "HybridRetriever", "reciprocal-rank fusion of the NaiveRAG and BM25 rankings"),
):
    register(Method(name=_name, label=_label, description=_description, retriever=f"{_RETRIEVERS}:{_class}",
                    systems=(System(_label, _name, headline=True),)))
