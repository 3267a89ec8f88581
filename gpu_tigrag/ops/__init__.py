"""Backend-generic array operations over a block of queries, shared by the methods: batched and push
PPR, subgraph PPR, score fusion, per-query sparse scores, top-k, dense products and row normalisation.

The rule this folder keeps: an op takes a `Backend` and arrays, works on NumPy and CuPy alike (a
`kernels/` twin where a loop is needed), and knows no method: nothing here imports `methods/`, an
index or a configuration section. A query's result never depends on its batch-mates."""
