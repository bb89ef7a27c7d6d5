# Open MPI, for the comparison suite only (tests/openmpi, bench/mpi,
# bench/compare-openmpi): chorus itself never links MPI.
#
# Sets CHORUS_HAVE_OPENMPI, CHORUS_MPICC and CHORUS_MPIRUN, and says at
# configure time what was found or why the comparison is skipped.
# CHORUS_WITH_OPENMPI_COMPARISON=OFF skips it; =ON makes a missing Open MPI an
# error (AUTO, the default, skips with a message).

# chorus_mpicc_executable(name SOURCES a.c ... [COMPILER wrapper] [DEPENDS header.h ...])
# Compiles C sources with an MPI C wrapper, as users build MPI programs, into
# ${CMAKE_CURRENT_BINARY_DIR}/name, built with `all` by the target mpicc_<name>.
# The wrapper is Open MPI's mpicc unless COMPILER names another (chorus-mpicc).
# Defined before the checks below, so chorus-mpicc programs build without
# Open MPI too.
function(chorus_mpicc_executable name)
  cmake_parse_arguments(ARG "" "COMPILER" "SOURCES;DEPENDS" ${ARGN})
  if(NOT ARG_COMPILER)
    set(ARG_COMPILER ${CHORUS_MPICC})
  endif()
  set(target mpicc_${name})
  set(flags -O2 -g -std=c11 -Wall -Wextra)
  if(CHORUS_WERROR)
    list(APPEND flags -Werror)
  endif()
  set(output ${CMAKE_CURRENT_BINARY_DIR}/${name})
  list(TRANSFORM ARG_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/ OUTPUT_VARIABLE sources)
  add_custom_command(OUTPUT ${output}
    COMMAND ${ARG_COMPILER} ${flags} -I${CMAKE_CURRENT_SOURCE_DIR} -o ${output} ${sources} -lm
    DEPENDS ${sources} ${ARG_DEPENDS}
    COMMENT "${ARG_COMPILER} ${name}" VERBATIM)
  add_custom_target(${target} ALL DEPENDS ${output})
  set_target_properties(${target} PROPERTIES OUTPUT_FILE ${output})
endfunction()

set(CHORUS_WITH_OPENMPI_COMPARISON AUTO CACHE STRING
  "Open MPI comparison tests and benchmark (tests/openmpi, bench/mpi): AUTO, ON or OFF")

set(CHORUS_HAVE_OPENMPI OFF)
if(CHORUS_WITH_OPENMPI_COMPARISON STREQUAL "OFF")
  message(STATUS "chorus: Open MPI comparison: not built (disabled with -DCHORUS_WITH_OPENMPI_COMPARISON=OFF)")
  return()
endif()

find_program(CHORUS_MPICC NAMES mpicc.openmpi mpicc DOC "Open MPI C compiler wrapper (comparison suite)")
find_program(CHORUS_MPIRUN NAMES mpirun.openmpi mpirun DOC "Open MPI launcher (comparison suite)")
set(why "")
if(NOT CHORUS_MPICC OR NOT CHORUS_MPIRUN)
  set(why "mpicc/mpirun not found")
else()
  execute_process(COMMAND ${CHORUS_MPIRUN} --version OUTPUT_VARIABLE version_text ERROR_VARIABLE version_text
    RESULT_VARIABLE version_status TIMEOUT 30)
  if(NOT version_status EQUAL 0 OR NOT version_text MATCHES "\\((Open MPI|OpenRTE)\\) ([0-9.]+)")
    set(why "${CHORUS_MPIRUN} is not Open MPI's mpirun")
  else()
    set(CHORUS_OPENMPI_VERSION ${CMAKE_MATCH_2})
  endif()
endif()

if(why STREQUAL "")
  set(CHORUS_HAVE_OPENMPI ON)
  message(STATUS "chorus: Open MPI comparison: built (Open MPI ${CHORUS_OPENMPI_VERSION}, ${CHORUS_MPICC})")
elseif(CHORUS_WITH_OPENMPI_COMPARISON STREQUAL "ON")
  message(FATAL_ERROR "chorus: Open MPI comparison requested but ${why}: apt-get install openmpi-bin libopenmpi-dev")
else()
  message(WARNING "chorus: Open MPI comparison: NOT built, its tests are skipped (${why}; "
    "apt-get install openmpi-bin libopenmpi-dev, as .ci/install-deps does)")
endif()
