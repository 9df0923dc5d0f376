# The dlock(1) man page (pandoc, from docs/dlock.1.md) and the Debian packages (cpack -G DEB):
#   dlock         the command line and its man page (when the CLI is built)
#   libdlock0.1   a shared build only: libdlock.so.0.1, named after its SONAME as Debian's policy
#                 for shared library packages asks, so two ABIs can be installed side by side
#   libdlock-dev  headers, the static library or the libdlock.so link, CMake package, pkg-config

if(DLOCK_BUILD_CLI AND NOT DLOCK_MAN_PAGE STREQUAL "OFF")
  find_program(DLOCK_PANDOC pandoc)
  if(DLOCK_PANDOC)
    set(man_source ${PROJECT_SOURCE_DIR}/docs/dlock.1.md)
    set(man_page ${CMAKE_CURRENT_BINARY_DIR}/man/dlock.1)
    add_custom_command(
      OUTPUT ${man_page}.gz
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/man
      COMMAND ${DLOCK_PANDOC} --standalone --to man
              --metadata "footer=dlock ${PROJECT_VERSION}" -o ${man_page} ${man_source}
      # -n: no name or time stamp in the header, so the package is reproducible.
      COMMAND gzip -9nf ${man_page}
      DEPENDS ${man_source}
      COMMENT "Generating the dlock(1) man page"
      VERBATIM)
    add_custom_target(dlock_man ALL DEPENDS ${man_page}.gz)
    install(FILES ${man_page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT cli)
  elseif(DLOCK_MAN_PAGE STREQUAL "ON")
    message(FATAL_ERROR "DLOCK_MAN_PAGE=ON needs pandoc (apt-get install pandoc)")
  else()
    message(STATUS "pandoc not found: the dlock(1) man page is not built")
  endif()
endif()

# The license (Apache-2.0, LICENSE) in Debian's machine-readable copyright format, with the full
# text, so that a package, or a plain `cmake --install`, carries it in share/doc/<package>/.
file(READ ${PROJECT_SOURCE_DIR}/LICENSE license_text)
string(REGEX REPLACE "[ \t]+\n" "\n" license_text "${license_text}")
string(STRIP "${license_text}" license_text)
# DEP-5: each line of the text indented by one space, an empty line written as " .".
string(REPLACE "\n" "\n " license_text "${license_text}")
string(REPLACE "\n \n" "\n .\n" license_text "${license_text}")
string(REPLACE "\n \n" "\n .\n" license_text "${license_text}")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/copyright
"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: dlock

Files: *
Copyright: 2026 The dlock authors
License: Apache-2.0
 ${license_text}
")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/copyright
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/libdlock-dev COMPONENT dev)
if(DLOCK_BUILD_CLI)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/copyright
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/dlock COMPONENT cli)
endif()
# libdlock.so.MAJOR.MINOR -> libdlock<MAJOR.MINOR> (Debian policy 8.1: the package is named after
# the SONAME; the name ends in a letter, so no hyphen before the version).
set(DLOCK_RUNTIME_PACKAGE libdlock${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
if(BUILD_SHARED_LIBS)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/copyright
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${DLOCK_RUNTIME_PACKAGE} COMPONENT runtime)
endif()

set(CPACK_PACKAGE_NAME dlock)
set(CPACK_PACKAGE_VENDOR "dlock")
set(CPACK_PACKAGE_CONTACT "dlock maintainers <dlock@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
# Only the components this build has: no empty dlock package from a library-only build, and the
# runtime package only when there is a shared library to put in it.
set(CPACK_COMPONENTS_ALL dev)
if(DLOCK_BUILD_CLI)
  list(PREPEND CPACK_COMPONENTS_ALL cli)
endif()
if(BUILD_SHARED_LIBS)
  list(APPEND CPACK_COMPONENTS_ALL runtime)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)

set(CPACK_DEBIAN_CLI_PACKAGE_NAME dlock)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
# The shared libraries the command needs (libssl, libstdc++, libc) are found by dpkg-shlibdeps.
# redis-tools is not needed: dlock speaks the protocol itself.
set(CPACK_DEBIAN_CLI_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_CLI_PACKAGE_SUGGESTS "redis-server | valkey-server")
set(CPACK_COMPONENT_CLI_DESCRIPTION
    "distributed locks on Redis from the shell\n dlock run NAME -- CMD runs CMD on exactly one machine at a time (a distributed\n flock(1)), with a renewed lease, fencing tokens and lost-lease handling;\n dlock status, ls and unlock inspect and manage locks.")

if(BUILD_SHARED_LIBS)
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME ${DLOCK_RUNTIME_PACKAGE})
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
  # A shlibs file, so that packages built against libdlock get their dependency from
  # dpkg-shlibdeps; with it CPack also adds the ldconfig calls to postinst and postrm.
  set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
  # Any later 0.1.x keeps the ABI (the SONAME changes with the minor version).
  set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
  set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
      "distributed locks on Redis for C++ (shared library)\nlibdlock.so.${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}, for programs linked against the shared dlock library.")
endif()

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libdlock-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# Consumers link OpenSSL (a static libdlock needs it; the CMake package finds it either way).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libssl-dev")
if(BUILD_SHARED_LIBS)
  # The libdlock.so link and the CMake package name the runtime package's exact files.
  string(APPEND CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
         ", ${DLOCK_RUNTIME_PACKAGE} (= ${PROJECT_VERSION})")
endif()
# dlock/asio.hpp, the optional asio adapter, needs standalone asio; nothing else does.
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "libasio-dev")
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "distributed locks on Redis for C++ (development files)\nC++20 headers, the dlock library (static, or the link to the shared one), its\nCMake package (find_package(dlock), target dlock::dlock) and pkg-config file\n(dlock.pc).")
include(CPack)
