"""The baselines as methods: NaiveRAG (dense cosine), BM25 and Hybrid (RRF of the two), on the base
index's chunks, embeddings and BM25 (no stage of their own, no settings); and `BM25 passages`, BM25 as
bm25s and Lucene score it (whole passages, word tokens, stop words: `passage_bm25.py`), with its settings
`RetrievalConfig.bm25passages`. `BM25` stays the paper's (graph tokens, chunks): TIGRAG's eq. 3.6 uses it."""

from ..registry import Method, System, register
from .config import Bm25PassagesQueryConfig

_RETRIEVERS = __name__ + ".retriever"

for _name, _label, _class, _description in (
    ("naiverag", "NaiveRAG", "NaiveragRetriever", "every chunk by its cosine to the query"),
    ("bm25", "BM25", "Bm25Retriever", "BM25 of the query's valid tokens"),
    ("hybrid", "Hybrid", "HybridRetriever", "reciprocal-rank fusion of the NaiveRAG and BM25 rankings"),
):
    register(Method(name=_name, label=_label, description=_description, retriever=f"{_RETRIEVERS}:{_class}",
                    systems=(System(_label, _name, headline=True),)))

register(Method(name="bm25passages", label="BM25 passages",
                description="BM25 of whole passages over word tokens and Lucene's stop words (bm25s's baseline)",
                retriever=f"{_RETRIEVERS}:Bm25PassagesRetriever", query_config=Bm25PassagesQueryConfig,
                systems=(System("BM25 passages", "bm25passages", headline=True),)))
