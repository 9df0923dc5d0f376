# Build settings shared by dlock's own targets (never imposed on consumers).

set(DLOCK_SANITIZE_FLAGS "")
if(DLOCK_SANITIZE STREQUAL "address")
  set(DLOCK_SANITIZE_FLAGS "-fsanitize=address,undefined")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(DLOCK_SANITIZE STREQUAL "thread")
  set(DLOCK_SANITIZE_FLAGS "-fsanitize=thread")
  # -Wno-tsan: GCC warns that TSan ignores the fences inside asio's handler allocator; the
  # fences pair with atomics TSan does see, so reports stay meaningful.
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer $<$<CXX_COMPILER_ID:GNU>:-Wno-tsan>)
  add_link_options(-fsanitize=thread)
elseif(NOT DLOCK_SANITIZE STREQUAL "")
  message(FATAL_ERROR "DLOCK_SANITIZE must be '', 'address' or 'thread'")
endif()

# Warnings for dlock's own code; errors only when DLOCK_WERROR is on (scripts/build and CI turn
# it on). A user's build of dlock never fails on a warning a newer compiler invents.
function(dlock_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wnon-virtual-dtor
                                           $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local -Wno-psabi>
                                           $<$<CXX_COMPILER_ID:Clang>:-Wshadow-uncaptured-local
                                                                      -Wthread-safety>)
  if(DLOCK_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# Generates a .cpp and .hpp that hold each Lua script as a string constant named after its file:
# src/locks/scripts/reentrant_acquire.lua -> dlock::lua::reentrant_acquire.
function(dlock_embed_lua out_cpp)
  get_filename_component(out_dir ${out_cpp} DIRECTORY)
  get_filename_component(out_name ${out_cpp} NAME_WE)
  set(out_hpp ${out_dir}/${out_name}.hpp)
  add_custom_command(
    OUTPUT ${out_cpp} ${out_hpp}
    COMMAND ${CMAKE_COMMAND} -DOUT_CPP=${out_cpp} -DOUT_HPP=${out_hpp} "-DFILES=${ARGN}"
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_lua.cmake
    DEPENDS ${ARGN} ${PROJECT_SOURCE_DIR}/cmake/embed_lua.cmake
    COMMENT "Embedding Lua scripts"
    VERBATIM)
endfunction()

# Writes dlock.pc. Paths are relative to the file's own location (${pcfiledir}), so the file
# stays right whatever prefix `cmake --install --prefix` or a package chooses at install time.
function(dlock_configure_pkgconfig out)
  set(pc_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
    message(FATAL_ERROR "dlock.pc needs relative CMAKE_INSTALL_LIBDIR and INCLUDEDIR")
  endif()
  # pc_dir -> prefix: one ".." per path component.
  string(REGEX REPLACE "[^/]+" ".." up "${pc_dir}")
  set(DLOCK_PC_PREFIX "\${pcfiledir}/${up}")
  set(DLOCK_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(DLOCK_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/dlock.pc.in ${out} @ONLY)
endfunction()
