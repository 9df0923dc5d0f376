# Conan 2 recipe for dlock, built from this checkout: conan create packaging/conan
import os
import re

from conan import ConanFile
from conan.errors import ConanInvalidConfiguration
from conan.tools.build import check_min_cppstd
from conan.tools.cmake import CMake, CMakeDeps, CMakeToolchain, cmake_layout
from conan.tools.files import copy, load, rmdir

# The checkout holding this recipe (packaging/conan/..).
ROOT = os.path.join("..", "..")


class DlockConan(ConanFile):
    name = "dlock"
    description = ("Distributed locks on Redis for C++20: reentrant, fair, read-write and "
                   "semaphore locks with leases, fencing tokens and RedLock")
    license = "Apache-2.0"
    topics = ("redis", "distributed-lock", "redlock", "mutex", "fencing")
    package_type = "library"
    settings = "os", "compiler", "build_type", "arch"
    options = {"shared": [True, False], "fPIC": [True, False]}
    default_options = {"shared": False, "fPIC": True}

    def set_version(self):
        # One place for the version: include/dlock/version.hpp, as for CMake.
        text = load(self, os.path.join(self.recipe_folder, ROOT, "include", "dlock", "version.hpp"))
        self.version = re.search(r'version = "([0-9]+\.[0-9]+\.[0-9]+)"', text).group(1)

    def export_sources(self):
        # What a library-only build reads; the tests, CLI, benchmarks and docs are not built.
        root = os.path.join(self.recipe_folder, ROOT)
        for pattern in ("CMakeLists.txt", "LICENSE", "cmake/*", "include/*", "src/*"):
            copy(self, pattern, root, self.export_sources_folder)

    def configure(self):
        if self.options.shared:
            self.options.rm_safe("fPIC")

    def layout(self):
        cmake_layout(self)

    def requirements(self):
        self.requires("openssl/[>=1.1 <4]")
        # Used inside the library, and by the optional public header dlock/asio.hpp; its versions
        # from Debian's 1.22 to 1.28 are the ones dlock is known to build with.
        self.requires("asio/[>=1.22 <1.29]", transitive_headers=True)

    def validate(self):
        check_min_cppstd(self, 20)
        if self.settings.os != "Linux":
            raise ConanInvalidConfiguration("dlock is built and tested on Linux only")

    def generate(self):
        tc = CMakeToolchain(self)
        # The library alone.
        tc.cache_variables["DLOCK_BUILD_TESTS"] = False
        tc.cache_variables["DLOCK_BUILD_CLI"] = False
        tc.cache_variables["DLOCK_BUILD_BENCH"] = False
        tc.cache_variables["DLOCK_MAN_PAGE"] = "OFF"
        tc.generate()
        CMakeDeps(self).generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def package(self):
        copy(self, "LICENSE", self.source_folder, os.path.join(self.package_folder, "licenses"))
        cmake = CMake(self)
        cmake.install()
        # Conan generates the CMake and pkg-config files from package_info() instead.
        rmdir(self, os.path.join(self.package_folder, "lib", "cmake"))
        rmdir(self, os.path.join(self.package_folder, "lib", "pkgconfig"))
        rmdir(self, os.path.join(self.package_folder, "share"))

    def package_info(self):
        # The names the project's own install uses: find_package(dlock), dlock::dlock, dlock.pc.
        self.cpp_info.set_property("cmake_file_name", "dlock")
        self.cpp_info.set_property("cmake_target_name", "dlock::dlock")
        self.cpp_info.set_property("pkg_config_name", "dlock")
        self.cpp_info.libs = ["dlock"]
        if self.settings.os in ("Linux", "FreeBSD"):
            self.cpp_info.system_libs = ["pthread"]
        # Conan requires every direct dependency to be named here; asio brings only headers.
        self.cpp_info.requires = ["openssl::ssl", "openssl::crypto", "asio::asio"]
