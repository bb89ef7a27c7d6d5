#include "transports/ofi/ofi_library.hpp"

#include "common/error.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace chorus::transport::ofi::library {

namespace {

constexpr const char* kSoname = "libfabric.so.1";

struct Functions {
  decltype(&::fi_getinfo) getinfo = nullptr;
  decltype(&::fi_freeinfo) freeinfo = nullptr;
  decltype(&::fi_dupinfo) dupinfo = nullptr;
  decltype(&::fi_fabric) fabric = nullptr;
  decltype(&::fi_strerror) strerror = nullptr;
  decltype(&::fi_version) version = nullptr;
  std::string error;  // why they are missing
};

// The symbol version a link against this header would bind (libfabric keeps
// old versions of functions whose structures grew), else the default one.
template <class Function>
void resolve(void* handle, const char* name, const char* version, Function& out, std::string& error) {
  void* symbol = dlvsym(handle, name, version);
  if (symbol == nullptr) symbol = dlsym(handle, name);
  if (symbol == nullptr && error.empty()) error = concat(kSoname, " has no ", name, ": ", dlerror());
  out = reinterpret_cast<Function>(symbol);
}

const Functions& functions() {
  static Functions loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    // Never closed: providers keep threads and atexit handlers inside it.
    void* handle = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      loaded.error = concat("cannot open ", kSoname, " (", why != nullptr ? why : "unknown error",
                            "): install libfabric1, or choose another transport (CHORUS_TRANSPORT=shm or tcp)");
      return;
    }
    resolve(handle, "fi_getinfo", "FABRIC_1.3", loaded.getinfo, loaded.error);
    resolve(handle, "fi_freeinfo", "FABRIC_1.3", loaded.freeinfo, loaded.error);
    resolve(handle, "fi_dupinfo", "FABRIC_1.3", loaded.dupinfo, loaded.error);
    resolve(handle, "fi_fabric", "FABRIC_1.1", loaded.fabric, loaded.error);
    resolve(handle, "fi_strerror", "FABRIC_1.0", loaded.strerror, loaded.error);
    resolve(handle, "fi_version", "FABRIC_1.0", loaded.version, loaded.error);
  });
  return loaded;
}

const Functions& usable() {
  const Functions& f = functions();
  if (!f.error.empty()) fail(Status::transport, "libfabric: ", f.error);
  return f;
}

}  // namespace

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints,
            fi_info** info) {
  return usable().getinfo(version, node, service, flags, hints, info);
}

void freeinfo(fi_info* info) {
  // Only what getinfo/dupinfo returned reaches here, so libfabric is open.
  if (info != nullptr) functions().freeinfo(info);
}

fi_info* dupinfo(const fi_info* info) { return usable().dupinfo(info); }

int fabric(fi_fabric_attr* attr, fid_fabric** fabric, void* context) { return usable().fabric(attr, fabric, context); }

uint32_t version() { return usable().version(); }

const char* strerror(int error) {
  const Functions& f = functions();
  return f.strerror != nullptr ? f.strerror(error) : "(libfabric not loaded)";
}

}  // namespace chorus::transport::ofi::library
