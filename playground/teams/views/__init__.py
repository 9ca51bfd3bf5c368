"""Team pages; split by sub-domain in the next commit."""
