"""Stand-in for conan.tools.build (see conan/__init__.py)."""
from conan.errors import ConanInvalidConfiguration


def check_min_cppstd(conanfile, cppstd, gnu_extensions=False):
    conanfile.recorded["cppstd"] = str(cppstd)
    current = conanfile.settings.get_safe("compiler.cppstd")
    if current is not None and int(str(current).replace("gnu", "")) < int(cppstd):
        raise ConanInvalidConfiguration(f"needs C++{cppstd}, compiler.cppstd is {current}")


def can_run(conanfile):
    return True
