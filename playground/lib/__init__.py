"""Helpers on no floor: every app may import them, they import no app."""
