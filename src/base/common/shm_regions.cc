#include "common/shm_regions.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace chorus::shm_regions {

int remove_stale(pid_t pid) {
  DIR* directory = opendir("/dev/shm");
  if (directory == nullptr) return 0;  // no POSIX shared memory here: nothing to leave behind
  const std::string prefix = std::to_string(pid) + ":";
  int removed = 0;
  while (const dirent* entry = readdir(directory)) {
    if (std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    if (unlinkat(dirfd(directory), entry->d_name, 0) == 0) ++removed;
  }
  closedir(directory);
  return removed;
}

bool remove_named(const std::string& endpoint_address) {
  const std::string scheme = "fi_shm://";
  if (endpoint_address.rfind(scheme, 0) != 0) return false;
  const std::string name = endpoint_address.substr(scheme.size());
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") return false;
  return ::unlink(("/dev/shm/" + name).c_str()) == 0;
}

}  // namespace chorus::shm_regions
