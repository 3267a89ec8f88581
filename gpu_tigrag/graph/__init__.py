"""Graph algorithms on the token co-occurrence graph (batched Personalized PageRank)."""
