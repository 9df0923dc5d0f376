# Builds a program against the created package and runs it (conan create runs this). With
# DLOCK_URL set (e.g. redis://127.0.0.1:6379) the program also takes a lock on that server.
import os

from conan import ConanFile
from conan.tools.build import can_run
from conan.tools.cmake import CMake, cmake_layout


class DlockTestConan(ConanFile):
    settings = "os", "compiler", "build_type", "arch"
    generators = "CMakeDeps", "CMakeToolchain"

    def requirements(self):
        self.requires(self.tested_reference_str)

    def layout(self):
        cmake_layout(self)

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def test(self):
        if can_run(self):
            program = os.path.join(self.cpp.build.bindir, "test_package")
            url = os.environ.get("DLOCK_URL")
            self.run(f"{program} {url}" if url else program, env="conanrun")
