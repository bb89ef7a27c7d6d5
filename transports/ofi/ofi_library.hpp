// libfabric, opened when the ofi transport is first used (docs/transport-ofi.md,
// "Loading libfabric"). Debian's libfabric links the psm providers, whose
// library constructor calibrates a clock with about 700 usleep() calls: 0.2 s
// per process on an idle machine, seconds on a loaded one. Linked directly,
// every chorus process paid that at start, whatever its transport; opened
// here, only a process that uses libfabric does.
//
// Only the few functions libfabric exports are reached through this file;
// everything else in libfabric's API is inline and calls through the
// objects these return.
#pragma once

#include <rdma/fabric.h>

#include <cstdint>

namespace chorus::transport::ofi::library {

// Each throws Error(Status::transport) naming libfabric's soname and the
// loader's message if libfabric cannot be opened.
int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints,
            fi_info** info);
void freeinfo(fi_info* info);
fi_info* dupinfo(const fi_info* info);  // dupinfo(nullptr): an empty fi_info (fi_allocinfo)
int fabric(fi_fabric_attr* attr, fid_fabric** fabric, void* context);
uint32_t version();  // of the libfabric opened (fi_version)
// Never throws: an error path must not fail while describing a failure.
const char* strerror(int error);

}  // namespace chorus::transport::ofi::library
