"""The retrieval methods, one package each (tigrag, spectrag, litesemrag, baselines), and their registry
(`registry.py`).

The rule this folder keeps: a method's package holds everything of that method (its settings section,
its index stage, its retriever and named systems) and imports no other method; the core reaches a
method only through the registry, and a plug-in registers the same way from outside the tree
(docs/architecture.md#adding-a-method)."""
