"""Team writes; split by sub-domain in the next commit."""
