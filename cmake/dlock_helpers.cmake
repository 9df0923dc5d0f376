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
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -Wno-tsan)
  add_link_options(-fsanitize=thread)
elseif(NOT DLOCK_SANITIZE STREQUAL "")
  message(FATAL_ERROR "DLOCK_SANITIZE must be '', 'address' or 'thread'")
endif()

function(dlock_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wpedantic -Wshadow=local
                                           -Wnon-virtual-dtor -Wno-psabi)
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
