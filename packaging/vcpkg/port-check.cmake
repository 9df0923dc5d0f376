# Runs the port's portfile.cmake without vcpkg, for packaging/check:
#   DLOCK_SOURCE_DIR=CHECKOUT cmake -DCHECK_ROOT=DIR -P packaging/vcpkg/port-check.cmake
# The vcpkg_* functions the port calls are defined here to do the same steps with plain CMake, in
# DIR laid out like vcpkg's own tree: the build in buildtrees/dlock/x64-linux-rel, the package in
# packages/dlock_x64-linux. They differ from vcpkg's in what a check here cannot or need not do:
# the dependencies are the system's (Debian's asio and OpenSSL), not vcpkg's ports, and only the
# release configuration is built (vcpkg builds debug the same way, into debug/).
# vcpkg only treats subdirectories of packaging/vcpkg as ports, so this file is not one.
cmake_minimum_required(VERSION 3.25)
if(NOT CHECK_ROOT)
  message(FATAL_ERROR "usage: DLOCK_SOURCE_DIR=CHECKOUT cmake -DCHECK_ROOT=DIR -P ${CMAKE_CURRENT_LIST_FILE}")
endif()

set(PORT dlock)
set(TARGET_TRIPLET x64-linux)
# x64-linux builds static libraries.
set(VCPKG_LIBRARY_LINKAGE static)
set(VCPKG_TARGET_IS_LINUX ON)
file(READ "${CMAKE_CURRENT_LIST_DIR}/${PORT}/vcpkg.json" dlock_check_manifest)
string(JSON VERSION GET "${dlock_check_manifest}" version)
set(CURRENT_BUILDTREES_DIR "${CHECK_ROOT}/buildtrees/${PORT}")
set(CURRENT_PACKAGES_DIR "${CHECK_ROOT}/packages/${PORT}_${TARGET_TRIPLET}")
set(dlock_check_build "${CURRENT_BUILDTREES_DIR}/${TARGET_TRIPLET}-rel")
# A fresh build, as vcpkg's: a reused cache would hide options the project does not know.
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}" "${CURRENT_BUILDTREES_DIR}")
file(MAKE_DIRECTORY "${CURRENT_BUILDTREES_DIR}")
cmake_host_system_information(RESULT dlock_check_jobs QUERY NUMBER_OF_LOGICAL_CORES)

# Runs a command, its output in buildtrees/dlock/LOG-out.log; on failure shows the log's end.
function(dlock_check_run log)
  set(out "${CURRENT_BUILDTREES_DIR}/${log}-out.log")
  execute_process(COMMAND ${ARGN} OUTPUT_FILE "${out}" ERROR_FILE "${out}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    file(STRINGS "${out}" lines)
    list(LENGTH lines n)
    set(first 0)
    if(n GREATER 30)
      math(EXPR first "${n} - 30")
    endif()
    list(SUBLIST lines ${first} -1 tail)
    list(JOIN tail "\n" tail)
    message(FATAL_ERROR "${tail}\n${log} failed (${rc}); log: ${out}")
  endif()
endfunction()

# Any argument a stand-in does not handle fails the check, rather than being dropped unseen.
function(dlock_check_no_unparsed fn)
  if(ARGN)
    message(FATAL_ERROR "${fn}: the stand-in does not handle ${ARGN}")
  endif()
endfunction()

function(vcpkg_from_github)
  message(FATAL_ERROR "vcpkg_from_github: the check builds the local checkout; set DLOCK_SOURCE_DIR")
endfunction()

# vcpkg's configure: Ninja, the build type, the package directory as the prefix, the linkage as
# BUILD_SHARED_LIBS, GNUInstallDirs' lib and bin, no downloads, then the port's options.
function(vcpkg_cmake_configure)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "SOURCE_PATH" "OPTIONS;OPTIONS_RELEASE;OPTIONS_DEBUG")
  dlock_check_no_unparsed(vcpkg_cmake_configure ${arg_UNPARSED_ARGUMENTS})
  if(VCPKG_LIBRARY_LINKAGE STREQUAL "dynamic")
    set(shared ON)
  else()
    set(shared OFF)
  endif()
  dlock_check_run(config-${TARGET_TRIPLET}-rel
    ${CMAKE_COMMAND} -S "${arg_SOURCE_PATH}" -B "${dlock_check_build}" -G Ninja
    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_INSTALL_PREFIX=${CURRENT_PACKAGES_DIR}"
    # Release without the optimizer: this checks the packaging (names, layout, relocation), not
    # the code, which the suites test; it compiles in a third of the time.
    -DCMAKE_CXX_FLAGS_RELEASE=-DNDEBUG
    -DBUILD_SHARED_LIBS=${shared} -DCMAKE_INSTALL_LIBDIR:STRING=lib
    -DCMAKE_INSTALL_BINDIR:STRING=bin -DFETCHCONTENT_FULLY_DISCONNECTED=ON
    -DCMAKE_EXPORT_NO_PACKAGE_REGISTRY=ON
    ${arg_OPTIONS} ${arg_OPTIONS_RELEASE})
  # An option the project does not know (a misspelt name) would be ignored silently by the
  # build; CMake lists it as not used.
  file(STRINGS "${CURRENT_BUILDTREES_DIR}/config-${TARGET_TRIPLET}-rel-out.log" lines)
  set(unused "")
  set(in_list OFF)
  foreach(line IN LISTS lines)
    if(line MATCHES "Manually-specified variables were not used")
      set(in_list ON)
    elseif(in_list AND line MATCHES "^ +([A-Za-z0-9_]+)$")
      list(APPEND unused ${CMAKE_MATCH_1})
    elseif(in_list AND NOT line STREQUAL "")
      set(in_list OFF)
    endif()
  endforeach()
  foreach(option IN LISTS arg_OPTIONS arg_OPTIONS_RELEASE)
    string(REGEX REPLACE "^-D([A-Za-z0-9_]+).*" "\\1" name "${option}")
    if(name IN_LIST unused)
      message(FATAL_ERROR "vcpkg_cmake_configure: the project does not use the port's ${option}")
    endif()
  endforeach()
  # For packaging/check, which compares them with the Conan recipe's.
  list(JOIN arg_OPTIONS "\n" options)
  file(WRITE "${CURRENT_BUILDTREES_DIR}/options.txt" "${options}\n")
endfunction()

function(vcpkg_cmake_install)
  cmake_parse_arguments(PARSE_ARGV 0 arg "DISABLE_PARALLEL;ADD_BIN_TO_PATH" "" "")
  dlock_check_no_unparsed(vcpkg_cmake_install ${arg_UNPARSED_ARGUMENTS})
  dlock_check_run(install-${TARGET_TRIPLET}-rel
    ${CMAKE_COMMAND} --build "${dlock_check_build}" --target install --parallel ${dlock_check_jobs})
endfunction()

# Moves the CMake package from CONFIG_PATH to share/<package>, and corrects the files' way to the
# prefix, which is now fewer directories up.
function(vcpkg_cmake_config_fixup)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "CONFIG_PATH;PACKAGE_NAME" "")
  dlock_check_no_unparsed(vcpkg_cmake_config_fixup ${arg_UNPARSED_ARGUMENTS})
  if(NOT arg_PACKAGE_NAME)
    set(arg_PACKAGE_NAME ${PORT})
  endif()
  set(from "${CURRENT_PACKAGES_DIR}/${arg_CONFIG_PATH}")
  set(to "${CURRENT_PACKAGES_DIR}/share/${arg_PACKAGE_NAME}")
  if(NOT IS_DIRECTORY "${from}")
    message(FATAL_ERROR "vcpkg_cmake_config_fixup: nothing installed in ${arg_CONFIG_PATH}")
  endif()
  file(MAKE_DIRECTORY "${to}")
  file(GLOB files "${from}/*")
  file(COPY ${files} DESTINATION "${to}")
  file(REMOVE_RECURSE "${from}")
  # lib/cmake is left empty: vcpkg removes it.
  get_filename_component(parent "${from}" DIRECTORY)
  file(GLOB rest "${parent}/*")
  if(NOT rest)
    file(REMOVE_RECURSE "${parent}")
  endif()

  string(REGEX MATCHALL "[^/]+" old_parts "${arg_CONFIG_PATH}")
  list(LENGTH old_parts old_depth)
  set(new_depth 2)
  set(line "get_filename_component(_IMPORT_PREFIX \"\${_IMPORT_PREFIX}\" PATH)\n")
  string(REPEAT "${line}" ${old_depth} old_up)
  string(REPEAT "${line}" ${new_depth} new_up)
  string(REPEAT "../" ${old_depth} old_rel)
  string(REPEAT "../" ${new_depth} new_rel)
  file(GLOB cmake_files "${to}/*.cmake")
  set(corrected 0)
  foreach(f IN LISTS cmake_files)
    file(READ "${f}" text)
    set(before "${text}")
    # install(EXPORT)'s files: the prefix is found by stripping directories off the file's path.
    set(first "get_filename_component(_IMPORT_PREFIX \"\${CMAKE_CURRENT_LIST_FILE}\" PATH)\n")
    string(FIND "${text}" "${first}" at)
    if(at GREATER -1)
      string(FIND "${text}" "${first}${old_up}" at_old)
      string(FIND "${text}" "${first}${old_up}${line}" too_deep)
      if(at_old EQUAL -1 OR too_deep GREATER -1)
        message(FATAL_ERROR "vcpkg_cmake_config_fixup: ${f} does not go ${old_depth} directories up to its prefix")
      endif()
      string(REPLACE "${first}${old_up}" "${first}${new_up}" text "${text}")
    endif()
    # configure_package_config_file's PACKAGE_PREFIX_DIR.
    string(REPLACE "\${CMAKE_CURRENT_LIST_DIR}/${old_rel}" "\${CMAKE_CURRENT_LIST_DIR}/${new_rel}" text "${text}")
    if(NOT text STREQUAL before)
      file(WRITE "${f}" "${text}")
      math(EXPR corrected "${corrected} + 1")
    endif()
  endforeach()
  if(corrected EQUAL 0)
    message(FATAL_ERROR "vcpkg_cmake_config_fixup: found no path to the prefix to correct in ${to}")
  endif()
endfunction()

# The .pc files: any absolute path to the package directory made relative to the file, then each
# file must be valid and its Requires found by pkg-config.
function(vcpkg_fixup_pkgconfig)
  cmake_parse_arguments(PARSE_ARGV 0 arg "SKIP_CHECK" "" "")
  dlock_check_no_unparsed(vcpkg_fixup_pkgconfig ${arg_UNPARSED_ARGUMENTS})
  find_program(pkg_config pkg-config REQUIRED)
  file(GLOB pcs "${CURRENT_PACKAGES_DIR}/lib/pkgconfig/*.pc" "${CURRENT_PACKAGES_DIR}/share/pkgconfig/*.pc")
  if(NOT pcs)
    message(FATAL_ERROR "vcpkg_fixup_pkgconfig: no .pc file installed")
  endif()
  foreach(pc IN LISTS pcs)
    file(READ "${pc}" text)
    string(REPLACE "${CURRENT_PACKAGES_DIR}" "\${pcfiledir}/../.." text "${text}")
    file(WRITE "${pc}" "${text}")
    get_filename_component(dir "${pc}" DIRECTORY)
    get_filename_component(name "${pc}" NAME_WE)
    set(ENV{PKG_CONFIG_PATH} "${dir}")
    dlock_check_run(pkgconfig-validate-${name} ${pkg_config} --validate "${pc}")
    if(NOT arg_SKIP_CHECK)
      dlock_check_run(pkgconfig-libs-${name} ${pkg_config} --print-errors --static --libs ${name})
    endif()
  endforeach()
endfunction()

function(vcpkg_install_copyright)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "COMMENT" "FILE_LIST")
  dlock_check_no_unparsed(vcpkg_install_copyright ${arg_UNPARSED_ARGUMENTS})
  set(out "${CURRENT_PACKAGES_DIR}/share/${PORT}/copyright")
  list(LENGTH arg_FILE_LIST n)
  if(n EQUAL 0)
    message(FATAL_ERROR "vcpkg_install_copyright: no FILE_LIST")
  elseif(n EQUAL 1 AND NOT arg_COMMENT)
    file(READ "${arg_FILE_LIST}" text)
  else()
    set(text "${arg_COMMENT}\n")
    foreach(f IN LISTS arg_FILE_LIST)
      get_filename_component(name "${f}" NAME)
      file(READ "${f}" body)
      string(APPEND text "\n${name}:\n\n${body}")
    endforeach()
  endif()
  file(WRITE "${out}" "${text}")
endfunction()

include("${CMAKE_CURRENT_LIST_DIR}/${PORT}/portfile.cmake")
