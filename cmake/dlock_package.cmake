# The dlock(1) man page (pandoc, from docs/dlock.1.md) and the Debian packages (cpack -G DEB):
#   dlock         the command line and its man page
#   libdlock-dev  headers, the library (static or shared, as built), CMake package, pkg-config

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
set(CPACK_COMPONENTS_ALL cli dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)

set(CPACK_DEBIAN_CLI_PACKAGE_NAME dlock)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
# The shared libraries the command needs (libssl, libstdc++, libc) are found by dpkg-shlibdeps.
# redis-tools is not needed: dlock speaks the protocol itself.
set(CPACK_DEBIAN_CLI_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_CLI_PACKAGE_SUGGESTS "redis-server")
set(CPACK_COMPONENT_CLI_DESCRIPTION
    "distributed locks on Redis from the shell\n dlock run NAME -- CMD runs CMD on exactly one machine at a time (a distributed\n flock(1)), with a renewed lease, fencing tokens and lost-lease handling;\n dlock status, ls and unlock inspect and manage locks.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libdlock-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
if(BUILD_SHARED_LIBS)
  set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS ON)
endif()
# Consumers link OpenSSL (a static libdlock needs it; the CMake package finds it either way).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libssl-dev")
# dlock/asio.hpp, the optional asio adapter, needs standalone asio; nothing else does.
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "libasio-dev")
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "distributed locks on Redis for C++ (development files)\n C++20 headers, the dlock library, its CMake package (find_package(dlock),\n target dlock::dlock) and pkg-config file (dlock.pc).")
include(CPack)
