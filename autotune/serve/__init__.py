"""The TEI-compatible reranker server."""
