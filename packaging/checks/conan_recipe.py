"""Checks packaging/conan/conanfile.py against what dlock's own install says, for packaging/check.

Usage: conan_recipe.py SOURCE STAGE BUILD PORT_OPTIONS WORK [RECIPE]
  SOURCE        the checkout
  STAGE         the vcpkg port's staged package (packages/dlock_x64-linux)
  BUILD         its build directory (the library-only build, as the port configured it)
  PORT_OPTIONS  the options the port passed to CMake, one a line
  WORK          an empty directory for the exported sources and the package
  RECIPE        the recipe (default: SOURCE/packaging/conan/conanfile.py)

Conan is not installed here: the recipe runs on the stand-in package beside this file (conan/),
which only records what the recipe declares. Every comparison is with the real installed files:
dlockConfig.cmake, dlockTargets*.cmake, dlock.pc, version.hpp, CMakeLists.txt.
"""
import glob
import importlib.util
import os
import re
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import conan  # noqa: E402  (the stand-in)
from conan.errors import ConanInvalidConfiguration  # noqa: E402

SETTINGS = {"os": "Linux", "arch": "x86_64", "compiler": "gcc", "compiler.version": "12",
            "compiler.cppstd": "20", "build_type": "Release"}
# Conan's OpenSSL components and the names dlock's CMake package and .pc file use for them.
OPENSSL = {"openssl::ssl": ("OpenSSL::SSL", "libssl"),
           "openssl::crypto": ("OpenSSL::Crypto", "libcrypto")}


class Mismatch(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise Mismatch(message)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def load_recipe(path, **kwargs):
    spec = importlib.util.spec_from_file_location(f"recipe_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    classes = [c for c in vars(module).values()
               if isinstance(c, type) and issubclass(c, conan.ConanFile) and c is not conan.ConanFile]
    expect(len(classes) == 1, f"{path} defines {len(classes)} ConanFile classes, not 1")
    return classes[0](SETTINGS, os.path.dirname(os.path.abspath(path)), **kwargs)


def call(recipe, method):
    if hasattr(recipe, method):
        getattr(recipe, method)()


def cmake_value(value):
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    return str(value)


def version_tuple(text):
    return tuple(int(p) for p in text.split("."))


def installed(stage):
    """What the staged install declares."""
    got = {}
    configs = glob.glob(os.path.join(stage, "share", "*", "*Config.cmake")) + \
        glob.glob(os.path.join(stage, "share", "*", "*-config.cmake"))
    configs = [c for c in configs if not re.search(r"(Config|-config)Version\.cmake$", c)]
    expect(len(configs) == 1, f"the staged install has {len(configs)} CMake config files: {configs}")
    config = configs[0]
    name = os.path.basename(config)
    got["cmake_file_name"] = name[:-len("Config.cmake")] if name.endswith("Config.cmake") \
        else name[:-len("-config.cmake")]
    share = os.path.dirname(config)
    version_file = read(os.path.join(share, f"{got['cmake_file_name']}ConfigVersion.cmake"))
    got["cmake_version"] = re.search(r'set\(PACKAGE_VERSION "([^"]+)"\)', version_file).group(1)

    targets = read(os.path.join(share, f"{got['cmake_file_name']}Targets.cmake"))
    got["targets"] = re.findall(r"add_library\((\S+) (?:STATIC|SHARED|UNKNOWN|INTERFACE) IMPORTED\)",
                                targets)
    expect(len(got["targets"]) == 1, f"dlockTargets.cmake defines {got['targets']}, not one target")
    links = re.search(r'INTERFACE_LINK_LIBRARIES "([^"]*)"', targets).group(1).replace("\\", "")
    got["links"] = [re.sub(r"^\$<LINK_ONLY:(.*)>$", r"\1", item) for item in links.split(";") if item]
    features = re.search(r'INTERFACE_COMPILE_FEATURES "([^"]*)"', targets)
    got["cxx_std"] = re.search(r"cxx_std_(\d+)", features.group(1)).group(1) if features else None
    locations = []
    for f in glob.glob(os.path.join(share, f"{got['cmake_file_name']}Targets-*.cmake")):
        locations += re.findall(r'IMPORTED_LOCATION_[A-Z]+ "([^"]+)"', read(f))
    got["target_libs"] = sorted({re.sub(r"^lib(.*?)\.(a|so.*)$", r"\1", os.path.basename(p))
                                 for p in locations})

    pcs = glob.glob(os.path.join(stage, "lib", "pkgconfig", "*.pc"))
    expect(len(pcs) == 1, f"the staged install has {len(pcs)} .pc files")
    got["pkg_config_name"] = os.path.basename(pcs[0])[:-3]
    fields = dict(re.findall(r"^([A-Za-z.]+): *(.*)$", read(pcs[0]), re.M))
    got["pc_version"] = fields.get("Version")
    got["pc_libs"] = re.findall(r"(?:^|\s)-l(\S+)", fields.get("Libs", ""))
    got["pc_private_libs"] = fields.get("Libs.private", "").split()
    got["pc_private_requires"] = fields.get("Requires.private", "").replace(",", " ").split()
    got["asio_header"] = os.path.join(stage, "include", "dlock", "asio.hpp")
    return got


def check(source, stage, build, port_options, work, recipe_path):
    version_hpp = read(os.path.join(source, "include", "dlock", "version.hpp"))
    version = re.search(r'version = "([0-9.]+)"', version_hpp).group(1)
    cmakelists = read(os.path.join(source, "CMakeLists.txt"))
    got = installed(stage)

    recipe = load_recipe(recipe_path)
    expect(not hasattr(type(recipe), "exports_sources"),
           "the check reads export_sources(), not an exports_sources attribute")
    call(recipe, "set_version")
    expect(recipe.name == "dlock", f"the recipe's name is {recipe.name!r}, not 'dlock'")
    expect(recipe.version == version,
           f"the recipe's version is {recipe.version}, include/dlock/version.hpp says {version}")
    expect(got["cmake_version"] == version and got["pc_version"] == version,
           f"the installed dlockConfigVersion.cmake ({got['cmake_version']}) or dlock.pc "
           f"({got['pc_version']}) is not version {version}")
    expect(recipe.license == "Apache-2.0", f"the recipe's license is {recipe.license!r}")
    print(f"   conan: dlock/{recipe.version}, Apache-2.0, as version.hpp", file=sys.stderr)

    call(recipe, "config_options")
    call(recipe, "configure")
    call(recipe, "requirements")
    call(recipe, "layout")
    call(recipe, "validate")
    expect(recipe.recorded["layout"] == "cmake_layout", "the recipe does not use cmake_layout()")
    expect(recipe.recorded["cppstd"] == got["cxx_std"],
           f"the recipe checks C++{recipe.recorded['cppstd']}, dlock::dlock requires "
           f"cxx_std_{got['cxx_std']}")
    requires = {ref.split("/")[0]: (ref, traits) for ref, traits in recipe.recorded["requires"]}
    expect(sorted(requires) == ["asio", "openssl"],
           f"the recipe requires {sorted(requires)}, not asio and openssl")
    openssl_min = re.search(r"find_package\(OpenSSL ([0-9.]+)", cmakelists).group(1)
    low = re.search(r"\[>=([0-9.]+)", requires["openssl"][0])
    expect(low and low.group(1) == openssl_min,
           f"the recipe's {requires['openssl'][0]} does not start at CMakeLists.txt's OpenSSL {openssl_min}")
    # The asio this build used must be inside the recipe's range.
    cache = read(os.path.join(build, "CMakeCache.txt"))
    asio_dir = re.search(r"^ASIO_INCLUDE_DIR:PATH=(.*)$", cache, re.M).group(1)
    number = int(re.search(r"#\s*define ASIO_VERSION (\d+)", read(os.path.join(asio_dir, "asio", "version.hpp"))).group(1))
    asio_used = (number // 100000, number // 100 % 1000, number % 100)
    bounds = re.fullmatch(r"asio/\[>=([0-9.]+) <([0-9.]+)\]", requires["asio"][0])
    expect(bounds, f"the recipe's {requires['asio'][0]} is not a [>=A <B] range")
    expect(version_tuple(bounds.group(1)) <= asio_used < version_tuple(bounds.group(2)),
           f"asio {'.'.join(map(str, asio_used))}, which this build used, is outside {requires['asio'][0]}")
    if re.search(r"#\s*include\s*[<\"]asio", read(got["asio_header"])):
        expect(requires["asio"][1].get("transitive_headers") is True,
               "dlock/asio.hpp includes asio, but the recipe's asio requirement is not transitive_headers")
    print(f"   conan: requires {requires['openssl'][0]} (CMakeLists.txt: OpenSSL {openssl_min}), "
          f"{requires['asio'][0]} (built here with {'.'.join(map(str, asio_used))})", file=sys.stderr)

    # generate(): the same cache variables as the vcpkg port, each an option the project has, and
    # the values the staged build was configured with.
    call(recipe, "generate")
    toolchain = recipe.recorded["toolchain"]
    expect(toolchain is not None and recipe.recorded["deps"],
           "generate() does not generate CMakeToolchain and CMakeDeps")
    expect(not toolchain.variables and not toolchain.preprocessor_definitions,
           "generate() sets toolchain variables or definitions the check does not compare")
    conan_options = {k: cmake_value(v) for k, v in toolchain.cache_variables.items()}
    port = dict(re.fullmatch(r"-D([A-Za-z0-9_]+)(?::[A-Z]+)?=(.*)", line).groups()
                for line in read(port_options).split("\n") if line)
    differ = sorted(k for k in set(conan_options) | set(port) if conan_options.get(k) != port.get(k))
    expect(not differ, "generate() and the vcpkg port differ: " +
           ", ".join(f"{k}={conan_options.get(k, '(unset)')} vs {port.get(k, '(unset)')}" for k in differ))
    for name, value in conan_options.items():
        expect(re.search(rf"option\({name}\b|set\({name}\b[^)]*\bCACHE\b", cmakelists),
               f"generate() sets {name}, which CMakeLists.txt does not declare")
        expect(re.search(rf"^{name}:[A-Z]+={re.escape(value)}$", cache, re.M),
               f"the library-only build does not have {name}={value}")
    print(f"   conan: generate() = the vcpkg port's options: "
          f"{' '.join(f'{k}={v}' for k, v in conan_options.items())}", file=sys.stderr)

    # export_sources(): the exported tree configures with those options (a missing file fails).
    recipe.export_sources_folder = os.path.join(work, "export")
    call(recipe, "export_sources")
    configure = subprocess.run(
        ["cmake", "-S", recipe.export_sources_folder, "-B", os.path.join(work, "export-build"),
         "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"] +
        [f"-D{k}={v}" for k, v in conan_options.items()],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    expect(configure.returncode == 0,
           "the exported sources do not configure: " +
           " ".join(l.strip() for l in configure.stdout.splitlines() if "rror" in l or "Cannot" in l)[:200])
    print("   conan: the exported sources configure", file=sys.stderr)

    # build() configures and builds; package() installs (really, from the library-only build made
    # with the same options) and keeps the libraries package_info() names.
    recipe.source_folder = recipe.export_sources_folder
    recipe.build_folder = build
    recipe.package_folder = os.path.join(work, "package")
    call(recipe, "build")
    call(recipe, "package")
    expect(recipe.recorded["cmake"] == ["configure", "build", "install"],
           f"build() and package() call CMake's {recipe.recorded['cmake']}, not configure, build, install")
    call(recipe, "package_info")
    info = recipe.cpp_info
    for lib in info.libs:
        expect(os.path.exists(os.path.join(recipe.package_folder, "lib", f"lib{lib}.a")),
               f"package_info() names lib{lib}, which the package does not hold")
    expect(os.path.exists(os.path.join(recipe.package_folder, "include", "dlock", "dlock.hpp")),
           "the package holds no include/dlock/dlock.hpp")
    expect(os.path.exists(os.path.join(recipe.package_folder, "licenses", "LICENSE")),
           "the package holds no licenses/LICENSE")

    # package_info() against the installed CMake package and .pc file.
    props = info.properties
    expect(props.get("cmake_file_name") == got["cmake_file_name"],
           f"cmake_file_name is {props.get('cmake_file_name')!r}, the installed config is "
           f"{got['cmake_file_name']}Config.cmake")
    expect(props.get("cmake_target_name") == got["targets"][0],
           f"cmake_target_name is {props.get('cmake_target_name')!r}, the installed "
           f"dlockTargets.cmake defines {got['targets'][0]}")
    expect(props.get("pkg_config_name") == got["pkg_config_name"],
           f"pkg_config_name is {props.get('pkg_config_name')!r}, the installed file is "
           f"{got['pkg_config_name']}.pc")
    expect(sorted(info.libs) == got["target_libs"] == sorted(got["pc_libs"]),
           f"libs are {info.libs}, the installed target links {got['target_libs']}, "
           f"dlock.pc -l{got['pc_libs']}")
    threads = "Threads::Threads" in got["links"]
    expect((info.system_libs == ["pthread"]) == threads == ("-pthread" in got["pc_private_libs"]),
           f"system_libs are {info.system_libs}; the installed target "
           f"{'links' if threads else 'does not link'} Threads::Threads, dlock.pc's Libs.private "
           f"is {got['pc_private_libs']}")
    ssl = sorted(r for r in info.requires if r.startswith("openssl::"))
    expect(all(r in OPENSSL for r in ssl), f"requires has OpenSSL components {ssl} the check cannot map")
    cmake_ssl = sorted(l for l in got["links"] if l.startswith("OpenSSL::"))
    expect(sorted(OPENSSL[r][0] for r in ssl) == cmake_ssl,
           f"requires has {ssl}, the installed target links {cmake_ssl}")
    expect(sorted(OPENSSL[r][1] for r in ssl) == sorted(got["pc_private_requires"]),
           f"requires has {ssl}, dlock.pc's Requires.private is {got['pc_private_requires']}")
    others = sorted(set(info.requires) - set(ssl))
    expect(others == ["asio::asio"],
           f"requires has {others} besides OpenSSL; only asio::asio (headers) is expected")
    unaccounted = [l for l in got["links"] if l != "Threads::Threads" and not l.startswith("OpenSSL::")]
    expect(not unaccounted, f"the installed target links {unaccounted}, which the recipe does not declare")
    print(f"   conan: package_info() = the installed package: {got['cmake_file_name']}Config.cmake, "
          f"{got['targets'][0]}, {got['pkg_config_name']}.pc, -l{' -l'.join(info.libs)}, "
          f"{' '.join(info.system_libs)}, {' '.join(ssl)}", file=sys.stderr)

    # test_package: runs with the stand-ins, requires the reference under test, and finds the
    # package by the names the recipe declares.
    test_dir = os.path.join(os.path.dirname(recipe_path), "test_package")
    tester = load_recipe(os.path.join(test_dir, "conanfile.py"),
                         tested_reference_str=f"dlock/{recipe.version}")
    call(tester, "requirements")
    call(tester, "layout")
    expect([r for r, _ in tester.recorded["requires"]] == [f"dlock/{recipe.version}"],
           f"test_package requires {tester.recorded['requires']}, not the tested reference")
    lists = read(os.path.join(test_dir, "CMakeLists.txt"))
    expect(re.search(rf"find_package\({re.escape(props['cmake_file_name'])}\b", lists) and
           re.search(rf"target_link_libraries\([^)]*{re.escape(props['cmake_target_name'])}", lists),
           "test_package/CMakeLists.txt does not use the recipe's file and target names")


def main():
    if len(sys.argv) not in (6, 7):
        print(__doc__, file=sys.stderr)
        return 64
    source, stage, build, port_options, work = sys.argv[1:6]
    recipe = sys.argv[6] if len(sys.argv) == 7 else os.path.join(source, "packaging", "conan", "conanfile.py")
    expect_standin = os.path.join(HERE, "conan")
    if os.path.dirname(os.path.abspath(conan.__file__)) != expect_standin:
        print(f"packaging/check: FAILED: conan: imported {conan.__file__}, not the stand-in", file=sys.stderr)
        return 1
    try:
        check(source, stage, build, port_options, work, recipe)
    except (Mismatch, ConanInvalidConfiguration) as e:
        print(f"packaging/check: FAILED: conan: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # the recipe (or the check) broke: say where, on one line
        frame = traceback.extract_tb(e.__traceback__)[-1]
        print(f"packaging/check: FAILED: conan: {type(e).__name__}: {e} "
              f"({frame.filename}:{frame.lineno})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
