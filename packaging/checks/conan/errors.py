"""Stand-in for conan.errors (see conan/__init__.py)."""


class ConanException(Exception):
    pass


class ConanInvalidConfiguration(ConanException):
    pass
