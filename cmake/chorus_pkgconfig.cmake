# chorus.pc (C++ API: carries -std=c++20) and chorus-c.pc (C API only), one
# template (cmake/chorus.pc.in). Relocatable: paths are relative to the .pc
# file's own directory (${pcfiledir} = <prefix>/<libdir>/pkgconfig), climbing
# as many levels as the libdir has, so a multiarch libdir
# (lib/x86_64-linux-gnu) works as well as lib or lib64.
#
#   chorus_write_pkgconfig(OUTPUT_DIR dir LIBDIR lib INCLUDEDIR include VERSION 0.1.0
#                          [EXTRA_LIBS flags] [RPATH ON|OFF])
#
# Also runs as a script (tests/install builds a multiarch layout with it):
#   cmake -DOUTPUT_DIR=... -DLIBDIR=... -DINCLUDEDIR=... -DVERSION=... [-DRPATH=ON] -P chorus_pkgconfig.cmake
set(CHORUS_PKGCONFIG_TEMPLATE ${CMAKE_CURRENT_LIST_DIR}/chorus.pc.in)

function(chorus_write_pkgconfig)
  cmake_parse_arguments(ARG "" "OUTPUT_DIR;LIBDIR;INCLUDEDIR;VERSION;EXTRA_LIBS;RPATH" "" ${ARGN})
  if(IS_ABSOLUTE "${ARG_LIBDIR}")
    # An absolute libdir is where the files are, wherever the prefix is.
    set(PC_PREFIX "${ARG_LIBDIR}")
    set(PC_LIBDIR "${ARG_LIBDIR}")
  else()
    # ${pcfiledir} is <prefix>/<libdir>/pkgconfig: one ".." for pkgconfig, one per libdir component.
    string(REGEX REPLACE "/+$" "" libdir "${ARG_LIBDIR}")
    string(REPLACE "/" ";" components "${libdir}")
    set(PC_PREFIX "\${pcfiledir}/..")
    foreach(component IN LISTS components)
      string(APPEND PC_PREFIX "/..")
    endforeach()
    set(PC_LIBDIR "\${prefix}/${libdir}")
  endif()
  if(IS_ABSOLUTE "${ARG_INCLUDEDIR}")
    set(PC_INCLUDEDIR "${ARG_INCLUDEDIR}")
  else()
    set(PC_INCLUDEDIR "\${prefix}/${ARG_INCLUDEDIR}")
  endif()
  # Programs then run without LD_LIBRARY_PATH; not needed where the system
  # linker looks anyway (/usr/lib/<multiarch>).
  set(PC_RPATH "")
  if(ARG_RPATH)
    set(PC_RPATH " -Wl,-rpath,\${libdir}")
  endif()
  set(PC_VERSION "${ARG_VERSION}")
  set(PC_EXTRA_LIBS "${ARG_EXTRA_LIBS}")
  set(PC_NAME chorus)
  set(PC_DESCRIPTION "MPI-style collective communication (C++20 API, chorus/chorus.hpp; C users: chorus-c)")
  set(PC_STD_FLAG " -std=c++20")
  configure_file(${CHORUS_PKGCONFIG_TEMPLATE} ${ARG_OUTPUT_DIR}/chorus.pc @ONLY)
  set(PC_NAME chorus-c)
  set(PC_DESCRIPTION "MPI-style collective communication, C API (chorus/chorus.h)")
  set(PC_STD_FLAG "")
  configure_file(${CHORUS_PKGCONFIG_TEMPLATE} ${ARG_OUTPUT_DIR}/chorus-c.pc @ONLY)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  chorus_write_pkgconfig(OUTPUT_DIR "${OUTPUT_DIR}" LIBDIR "${LIBDIR}" INCLUDEDIR "${INCLUDEDIR}"
    VERSION "${VERSION}" EXTRA_LIBS "${EXTRA_LIBS}" RPATH "${RPATH}")
endif()
