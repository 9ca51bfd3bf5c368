"""Helpers and fixtures shared by several test packages."""
