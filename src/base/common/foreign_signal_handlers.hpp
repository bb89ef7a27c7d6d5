// libfabric links PSM (libpsm_infinipath), whose library, libinfinipath,
// installs handlers for SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV and SIGTERM
// when it is loaded, unless IPATH_NO_BACKTRACE is set: they print a backtrace
// and exit(1), so a segfault or Ctrl-C shows as "exited with status 1" and
// the real signal is lost. chorusrun and mpirun set IPATH_NO_BACKTRACE; for
// other launchers the library removes those handlers at init.
#pragma once

namespace chorus::signals {

// Puts back the default action of every signal whose handler lives in
// libinfinipath; returns how many. Handlers the application installed (or
// any other library) are left alone.
int remove_infinipath_handlers();

}  // namespace chorus::signals
