// libfabric's shm provider (1.17) keeps each endpoint's queue in a POSIX
// shared-memory file named "<pid>:<n>:<m>" under /dev/shm and removes it at
// exit or on a catchable signal. A process killed by SIGKILL leaves its
// files behind (16 MiB each), and a later process that gets the same pid
// cannot create its own: fi_enable fails with EBUSY.
#pragma once

#include <sys/types.h>

#include <string>

namespace chorus::shm_regions {

// Removes /dev/shm/<pid>:* files and returns how many were removed. Only for
// a pid whose process is gone, or this process before it opened any
// endpoint: both cases mean the files are stale.
int remove_stale(pid_t pid);

// Removes the file of the region an shm endpoint address names
// ("fi_shm://<name>"); false if the address is not of that form or there
// is no such file. Mappings stay valid; only the name goes.
bool remove_named(const std::string& endpoint_address);

}  // namespace chorus::shm_regions
