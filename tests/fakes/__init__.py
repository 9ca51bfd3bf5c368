"""Real loopback servers that stand in for upstream providers in tests."""
