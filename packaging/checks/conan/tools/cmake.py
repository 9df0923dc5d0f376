"""Stand-in for conan.tools.cmake (see conan/__init__.py).

The toolchain and deps generators record what the recipe gives them. CMake records configure and
build (the check builds the same tree with plain CMake), and install() really installs: it runs
`cmake --install` on the recipe's build_folder into its package_folder.
"""
import subprocess


def cmake_layout(conanfile, generator=None, src_folder=".", build_folder="build"):
    conanfile.recorded["layout"] = "cmake_layout"


class CMakeToolchain:
    def __init__(self, conanfile, generator=None):
        self._conanfile = conanfile
        self.cache_variables = {}
        self.variables = {}
        self.preprocessor_definitions = {}

    def generate(self):
        self._conanfile.recorded["toolchain"] = self


class CMakeDeps:
    def __init__(self, conanfile):
        self._conanfile = conanfile

    def generate(self):
        self._conanfile.recorded["deps"] = True


class CMake:
    def __init__(self, conanfile):
        self._conanfile = conanfile

    def configure(self, variables=None, build_script_folder=None, cli_args=None):
        if variables or build_script_folder or cli_args:
            raise NotImplementedError("the stand-in configures only as the toolchain says")
        self._conanfile.recorded["cmake"].append("configure")

    def build(self, build_type=None, target=None, cli_args=None, build_tool_args=None):
        if target or cli_args or build_tool_args:
            raise NotImplementedError("the stand-in builds only the default target")
        self._conanfile.recorded["cmake"].append("build")

    def install(self, build_type=None, component=None):
        if component:
            raise NotImplementedError("the stand-in installs everything")
        self._conanfile.recorded["cmake"].append("install")
        subprocess.run(["cmake", "--install", self._conanfile.build_folder,
                        "--prefix", self._conanfile.package_folder],
                       check=True, stdout=subprocess.DEVNULL)
