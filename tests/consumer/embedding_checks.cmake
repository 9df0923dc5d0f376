# Shared by the two consumers that build dlock inside their own project (fetchcontent/,
# subdirectory/): what pulling dlock in must leave alone, checked at configure time.
#   dlock_consumer_before()   records the parent's settings
#   dlock_consumer_after()    after dlock was added: fails if it changed them, defined more than
#                             its library, or gave its warnings to its users

set(dlock_consumer_watched
    BUILD_SHARED_LIBS CMAKE_BUILD_TYPE CMAKE_CXX_FLAGS CMAKE_CXX_STANDARD CMAKE_CXX_EXTENSIONS
    CMAKE_UNITY_BUILD CMAKE_POSITION_INDEPENDENT_CODE CMAKE_EXPORT_COMPILE_COMMANDS)

macro(dlock_consumer_before)
  foreach(v IN LISTS dlock_consumer_watched)
    set(dlock_consumer_was_${v} "${${v}}")
    if(DEFINED CACHE{${v}})
      set(dlock_consumer_cached_${v} ON)
    else()
      set(dlock_consumer_cached_${v} OFF)
    endif()
  endforeach()
endmacro()

function(dlock_consumer_after)
  foreach(v IN LISTS dlock_consumer_watched)
    if(NOT "${${v}}" STREQUAL "${dlock_consumer_was_${v}}")
      message(FATAL_ERROR "adding dlock changed the parent's ${v}: "
                          "'${dlock_consumer_was_${v}}' -> '${${v}}'")
    endif()
    if(DEFINED CACHE{${v}} AND NOT dlock_consumer_cached_${v})
      message(FATAL_ERROR "adding dlock created the cache entry ${v} in the parent project")
    endif()
  endforeach()
  # Only the library: no tests, command line, benchmarks or test helpers unless asked for.
  foreach(t dlock_cli dlock_embedded dlock_internal dlock_unit_tests dlock_integration_tests
            dlock_torture dlock_bench)
    if(TARGET ${t})
      message(FATAL_ERROR "a subproject build of dlock defined ${t}; only the library was asked for")
    endif()
  endforeach()
  if(NOT TARGET dlock::dlock)
    message(FATAL_ERROR "no dlock::dlock target")
  endif()
  # dlock's warning flags (and -Werror) are its own: none reach the targets that link it.
  get_target_property(options dlock INTERFACE_COMPILE_OPTIONS)
  if(options)
    message(FATAL_ERROR "dlock::dlock passes compile options to its users: ${options}")
  endif()
  get_target_property(definitions dlock INTERFACE_COMPILE_DEFINITIONS)
  if(definitions)
    message(FATAL_ERROR "dlock::dlock passes definitions to its users: ${definitions}")
  endif()
  get_directory_property(parent_options COMPILE_OPTIONS)
  if(parent_options)
    message(FATAL_ERROR "the parent directory gained compile options: ${parent_options}")
  endif()
  message(STATUS "dlock added as a subproject: the library only, nothing of the parent changed")
endfunction()
