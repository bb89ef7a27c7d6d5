#include "common/foreign_signal_handlers.hpp"

#include "common/log.hpp"

#include <dlfcn.h>
#include <signal.h>

#include <cstring>

namespace chorus::signals {

int remove_infinipath_handlers() {
  int removed = 0;
  for (int signal_number : {SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV, SIGTERM, SIGFPE, SIGQUIT}) {
    struct sigaction current {};
    if (sigaction(signal_number, nullptr, &current) != 0) continue;
    const void* handler = (current.sa_flags & SA_SIGINFO) != 0 ? reinterpret_cast<const void*>(current.sa_sigaction)
                                                                : reinterpret_cast<const void*>(current.sa_handler);
    if (handler == reinterpret_cast<const void*>(SIG_DFL) || handler == reinterpret_cast<const void*>(SIG_IGN)) continue;
    Dl_info owner{};
    if (dladdr(handler, &owner) == 0 || owner.dli_fname == nullptr || std::strstr(owner.dli_fname, "libinfinipath") == nullptr) {
      continue;
    }
    struct sigaction restored {};
    restored.sa_handler = SIG_DFL;
    sigemptyset(&restored.sa_mask);
    if (sigaction(signal_number, &restored, nullptr) == 0) ++removed;
  }
  if (removed > 0) {
    log::info("removed ", removed, " signal handlers of libinfinipath (loaded with libfabric's PSM provider) that turn "
              "crashes and SIGINT/SIGTERM into exit(1); set IPATH_NO_BACKTRACE=1 to keep them from being installed");
  }
  return removed;
}

}  // namespace chorus::signals
