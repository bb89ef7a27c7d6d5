// Creating, publishing, opening and checking the shared-memory segments
// (layout: shm_segment.hpp).
#include "transports/shm/shm_segment.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "transports/shm/shm_transport.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>

namespace chorus::transport {

namespace shm {

namespace {

Mapping map_segment(int fd, size_t bytes, const char* what, const std::string& name, int peer) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    fail_peer(Status::transport, peer, "shm: mmap of ", what, " segment ", name, " (", bytes,
              " bytes) failed: ", errno_string(errno));
  }
  return Mapping(base, bytes);
}

}  // namespace

std::string host_name() {
  char host[64] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "?";
  return host;
}

OwnSegment create_own_segment(int senders, size_t ring_bytes) {
  static std::atomic<unsigned> created{0};
  // The name lives only between these two calls: however this process ends
  // later, it leaves no file in /dev/shm. Peers open the segment through
  // /proc/<pid>/fd/<fd> until all have mapped it. "<pid>:..." like libfabric
  // shm's files, so chorusrun's clean-up of a rank's /dev/shm files
  // (shm_regions::remove_stale) covers even that instant.
  const std::string name = concat("/", getpid(), ":chorus-shm-", created.fetch_add(1));
  const size_t bytes = segment_bytes(senders, ring_bytes);
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 && errno == EEXIST) {
    // This process makes each name once, so the file is a leftover of a
    // process with the same pid killed inside this window (pids repeat,
    // quickly in a container): it is nobody's, remove it and take the name.
    if (shm_unlink(name.c_str()) == 0) {
      log::info("shm: removed /dev/shm", name, ", left by an earlier process with pid ", getpid());
    }
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  }
  if (fd < 0) {
    fail(Status::transport, "shm: shm_open(/dev/shm", name, ") failed: ", errno_string(errno));
  }
  if (shm_unlink(name.c_str()) != 0) {
    const int err = errno;
    close(fd);
    fail(Status::transport, "shm: shm_unlink(/dev/shm", name, ") failed: ", errno_string(err));
  }
  // posix_fallocate, not just ftruncate: a tmpfs too small for the rings
  // (a container's default /dev/shm is 64 MiB) must fail here, clearly,
  // and not with SIGBUS on the first write to a page it cannot back.
  const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    close(fd);
    fail(Status::transport, "shm: reserving ", bytes, " bytes for /dev/shm", name, " failed: ",
         errno_string(err),
         err == ENOSPC ? concat(" (each rank needs ranks x ", ring_bytes,
                                " bytes of /dev/shm: enlarge it, e.g. docker --shm-size, or use CHORUS_TRANSPORT=ofi)")
                       : std::string());
  }
  Mapping own;
  try {
    own = map_segment(fd, bytes, "own", concat("/dev/shm", name), -1);
  } catch (...) {
    close(fd);
    throw;
  }
  SegmentHeader* header = new (own.bytes()) SegmentHeader{};
  header->magic = kSegmentMagic;
  header->version = kLayoutVersion;
  header->senders = static_cast<uint32_t>(senders);
  header->ring_bytes = ring_bytes;
  header->owner_address = reinterpret_cast<uintptr_t>(header);
  header->owner_pid = getpid();
  for (int sender = 0; sender < senders; ++sender) new (own.control(sender)) RingControl{};
  return OwnSegment{std::move(own), fd};
}

Blob segment_address(int fd, int senders, size_t ring_bytes) {
  AddressBlob blob{};
  blob.magic = kSegmentMagic;
  blob.pid = getpid();
  blob.segment_bytes = segment_bytes(senders, ring_bytes);
  std::snprintf(blob.host, sizeof blob.host, "%s", host_name().c_str());
  // Peers open the segment through our descriptor: it has no name in /dev/shm.
  std::snprintf(blob.name, sizeof blob.name, "/proc/%d/fd/%d", static_cast<int>(getpid()), fd);
  Blob out(sizeof blob);
  std::memcpy(out.data(), &blob, sizeof blob);
  return out;
}

AddressBlob parse_address(const Blob& bytes, int peer, int rank, int senders, size_t ring_bytes,
                          const std::string& own_host) {
  AddressBlob blob{};
  if (bytes.size() != sizeof blob) {
    fail_peer(Status::transport, peer, "shm: rank ", peer, " published a ", bytes.size(),
              "-byte address, expected ", sizeof blob, " (is it running the shm transport of this chorus version?)");
  }
  std::memcpy(&blob, bytes.data(), sizeof blob);
  blob.host[sizeof blob.host - 1] = '\0';
  blob.name[sizeof blob.name - 1] = '\0';
  if (blob.magic != kSegmentMagic) {
    fail_peer(Status::transport, peer, "shm: rank ", peer, " published an address that is not a chorus shm one");
  }
  if (own_host != blob.host) {
    fail_peer(Status::transport, peer, "shm: rank ", peer, " runs on host \"", blob.host, "\", rank ", rank,
              " on \"", own_host, "\": the shm transport joins ranks of one host only (CHORUS_TRANSPORT=ofi "
              "or verbs spans hosts)");
  }
  if (blob.segment_bytes != segment_bytes(senders, ring_bytes)) {
    fail_peer(Status::transport, peer, "shm: rank ", peer, "'s segment is ", blob.segment_bytes,
              " bytes, this rank expects ", segment_bytes(senders, ring_bytes),
              " (do all ranks use the same CHORUS_EAGER_LIMIT?)");
  }
  return blob;
}

Mapping open_peer_segment(const AddressBlob& blob, int peer, int senders, size_t ring_bytes) {
  // Only a descriptor of the process that published the address: a
  // malformed one must not open some other file.
  if (std::string(blob.name).rfind(concat("/proc/", blob.pid, "/fd/"), 0) != 0) {
    fail_peer(Status::transport, peer, "shm: rank ", peer, " published the segment path \"", blob.name,
              "\", which is not one of its descriptors (is it running the shm transport of this chorus version?)");
  }
  const int fd = open(blob.name, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    fail_peer(Status::transport, peer, "shm: opening rank ", peer, "'s segment ", blob.name, " failed: ",
              errno_string(err), " (rank ", peer, ", pid ", blob.pid, ")",
              err == EACCES || err == EPERM
                  ? "; this kernel or container forbids opening another process' descriptors (Yama ptrace_scope, "
                    "CAP_SYS_PTRACE): use CHORUS_TRANSPORT=ofi"
                  : "");
  }
  struct stat facts {};
  if (fstat(fd, &facts) != 0 || static_cast<uint64_t>(facts.st_size) < blob.segment_bytes) {
    close(fd);
    fail_peer(Status::transport, peer, "shm: rank ", peer, "'s segment ", blob.name,
              " is smaller than the ", blob.segment_bytes, " bytes it announced");
  }
  Mapping mapping;
  try {
    mapping = map_segment(fd, blob.segment_bytes, "a peer's", blob.name, peer);
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  const SegmentHeader* header = mapping.header();
  if (header->magic != kSegmentMagic || header->version != kLayoutVersion ||
      header->senders != static_cast<uint32_t>(senders) || header->ring_bytes != ring_bytes ||
      header->owner_pid != blob.pid) {
    fail_peer(Status::transport, peer, "shm: rank ", peer, "'s segment ", blob.name,
              " does not hold the layout it announced (another job's file?)");
  }
  return mapping;
}

void check_cross_memory_attach(pid_t pid, const Mapping& segment, int peer) {
  uint64_t magic = 0;
  iovec into{&magic, sizeof magic};
  iovec from{reinterpret_cast<void*>(segment.header()->owner_address), sizeof magic};
  const ssize_t copied = process_vm_readv(pid, &into, 1, &from, 1, 0);
  if (copied != static_cast<ssize_t>(sizeof magic) || magic != kSegmentMagic) {
    const int err = copied < 0 ? errno : EIO;
    fail_peer(Status::transport, peer, "shm: reading rank ", peer, " (pid ", pid,
              ")'s memory with process_vm_readv failed: ", errno_string(err),
              "; this kernel or container forbids cross-memory attach (Yama ptrace_scope, seccomp, "
              "CAP_SYS_PTRACE): use CHORUS_TRANSPORT=ofi");
  }
}

}  // namespace shm

bool shm_cross_memory_attach_allowed(std::string* why) {
  std::ifstream file("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  if (!(file >> scope)) return true;  // no Yama
  if (scope <= 1) return true;
  if (why != nullptr) {
    *why = concat("/proc/sys/kernel/yama/ptrace_scope is ", scope,
                  ": processes may not read each other's memory (process_vm_readv)");
  }
  return false;
}

}  // namespace chorus::transport
