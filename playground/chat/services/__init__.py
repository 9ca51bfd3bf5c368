"""Chat writes; split by idea in the next commit."""
