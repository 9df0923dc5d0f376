"""Stand-in for conan.tools (see conan/__init__.py)."""
