# The source: $DLOCK_SOURCE_DIR if set (a local checkout; keep it through vcpkg's environment
# with VCPKG_KEEP_ENV_VARS=DLOCK_SOURCE_DIR), else the checkout this overlay port sits in
# (packaging/vcpkg/dlock), else a release from GitHub.
if(DEFINED ENV{DLOCK_SOURCE_DIR})
  set(SOURCE_PATH "$ENV{DLOCK_SOURCE_DIR}")
elseif(EXISTS "${CMAKE_CURRENT_LIST_DIR}/../../../include/dlock/version.hpp")
  get_filename_component(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
else()
  # For a registry: set REPO to where dlock is published, and SHA512 to the release archive's.
  vcpkg_from_github(
    OUT_SOURCE_PATH SOURCE_PATH
    REPO dlock/dlock
    REF "v${VERSION}"
    SHA512 0
    HEAD_REF main
  )
endif()

# The library alone: no tests, command line, benchmarks or man page.
vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    -DDLOCK_BUILD_TESTS=OFF
    -DDLOCK_BUILD_CLI=OFF
    -DDLOCK_BUILD_BENCH=OFF
    -DDLOCK_MAN_PAGE=OFF
)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(CONFIG_PATH lib/cmake/dlock)
vcpkg_fixup_pkgconfig()

file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/debug/include" "${CURRENT_PACKAGES_DIR}/debug/share")
# The Debian-style share/doc/<package>/ copyright files: vcpkg keeps the license in
# share/dlock/copyright instead.
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/share/doc")

vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
