// CPU time this process has used, all its threads (user + system), for
// debug lines that say where a start-up's CPU goes: on an oversubscribed
// host the wall time of a step is mostly waiting for a core.
#pragma once

#include <time.h>

namespace chorus {

inline double process_cpu_ms() {
  timespec now{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now) != 0) return 0;
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

}  // namespace chorus
