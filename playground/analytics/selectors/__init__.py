"""Dashboard and request-log reads; split by idea in the next commit."""
