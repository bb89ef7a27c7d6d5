// Error classes, error codes with messages, error handlers, and the two ways
// this layer ends a process (MPI_Abort and MPI_ERRORS_ARE_FATAL). libchorus
// itself never exits; only this file does.
#include "mpi/internal.hpp"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

extern "C" {
struct chorus_mpi_errhandler chorus_mpi_errors_are_fatal = {true, "MPI_ERRORS_ARE_FATAL"};
struct chorus_mpi_errhandler chorus_mpi_errors_return = {false, "MPI_ERRORS_RETURN"};
}

namespace chorus::mpi {

namespace {

struct ErrorClassInfo {
  const char* name;
  const char* description;
};

// Indexed by error class (MPI_SUCCESS..MPI_ERR_LASTCODE).
constexpr std::array<ErrorClassInfo, MPI_ERR_LASTCODE + 1> kErrorClasses = {{
    {"MPI_SUCCESS", "no error"},
    {"MPI_ERR_BUFFER", "invalid buffer pointer"},
    {"MPI_ERR_COUNT", "invalid count argument"},
    {"MPI_ERR_TYPE", "invalid datatype"},
    {"MPI_ERR_TAG", "invalid tag argument"},
    {"MPI_ERR_COMM", "invalid communicator"},
    {"MPI_ERR_RANK", "invalid rank"},
    {"MPI_ERR_REQUEST", "invalid request"},
    {"MPI_ERR_ROOT", "invalid root"},
    {"MPI_ERR_GROUP", "invalid group"},
    {"MPI_ERR_OP", "invalid reduce operation"},
    {"MPI_ERR_TOPOLOGY", "invalid communicator topology"},
    {"MPI_ERR_DIMS", "invalid topology dimension argument"},
    {"MPI_ERR_ARG", "invalid argument of some other kind"},
    {"MPI_ERR_UNKNOWN", "unknown error"},
    {"MPI_ERR_TRUNCATE", "message truncated on receive"},
    {"MPI_ERR_OTHER", "known error not in this list"},
    {"MPI_ERR_INTERN", "internal error"},
    {"MPI_ERR_IN_STATUS", "error code is in status"},
    {"MPI_ERR_PENDING", "pending request"},
    {"MPI_ERR_ACCESS", "permission denied"},
    {"MPI_ERR_AMODE", "invalid file access mode"},
    {"MPI_ERR_ASSERT", "invalid assert argument"},
    {"MPI_ERR_BAD_FILE", "invalid file name"},
    {"MPI_ERR_BASE", "invalid base argument"},
    {"MPI_ERR_CONVERSION", "data conversion error"},
    {"MPI_ERR_DISP", "invalid displacement argument"},
    {"MPI_ERR_DUP_DATAREP", "data representation already defined"},
    {"MPI_ERR_FILE_EXISTS", "file exists"},
    {"MPI_ERR_FILE_IN_USE", "file in use"},
    {"MPI_ERR_FILE", "invalid file handle"},
    {"MPI_ERR_INFO_KEY", "invalid info key"},
    {"MPI_ERR_INFO_NOKEY", "info key not defined"},
    {"MPI_ERR_INFO_VALUE", "invalid info value"},
    {"MPI_ERR_INFO", "invalid info object"},
    {"MPI_ERR_IO", "I/O error"},
    {"MPI_ERR_KEYVAL", "invalid attribute key"},
    {"MPI_ERR_LOCKTYPE", "invalid lock type"},
    {"MPI_ERR_NAME", "invalid service name"},
    {"MPI_ERR_NO_MEM", "out of memory"},
    {"MPI_ERR_NOT_SAME", "collective arguments not identical"},
    {"MPI_ERR_NO_SPACE", "no space left"},
    {"MPI_ERR_NO_SUCH_FILE", "no such file"},
    {"MPI_ERR_PORT", "invalid port name"},
    {"MPI_ERR_QUOTA", "quota exceeded"},
    {"MPI_ERR_READ_ONLY", "read-only file or file system"},
    {"MPI_ERR_RMA_CONFLICT", "conflicting RMA accesses"},
    {"MPI_ERR_RMA_SYNC", "wrong RMA synchronization"},
    {"MPI_ERR_SERVICE", "invalid service"},
    {"MPI_ERR_SIZE", "invalid size argument"},
    {"MPI_ERR_SPAWN", "error spawning processes"},
    {"MPI_ERR_UNSUPPORTED_DATAREP", "unsupported data representation"},
    {"MPI_ERR_UNSUPPORTED_OPERATION", "operation not supported"},
    {"MPI_ERR_WIN", "invalid window"},
    {"MPI_ERR_RMA_RANGE", "RMA target outside the window"},
    {"MPI_ERR_RMA_ATTACH", "memory cannot be attached"},
    {"MPI_ERR_RMA_SHARED", "memory cannot be shared"},
    {"MPI_ERR_RMA_FLAVOR", "wrong window flavor"},
}};

// Error codes above MPI_ERR_LASTCODE carry the message of one failure. The
// most recent kKeptCodes are kept; older codes still map to their class.
constexpr int kFirstCode = 1000;
constexpr int kKeptCodes = 256;

struct CodeEntry {
  int code = 0;
  int error_class = 0;
  std::string message;
};

struct CodeTable {
  std::mutex mutex;
  std::array<CodeEntry, kKeptCodes> entries;
  int next = kFirstCode;
};

CodeTable& codes() {
  static CodeTable* table = new CodeTable();  // never destroyed: usable until _exit
  return *table;
}

int make_code(int error_class, const std::string& message) {
  CodeTable& table = codes();
  std::lock_guard<std::mutex> lock(table.mutex);
  const int code = table.next;
  table.next = table.next == INT32_MAX ? kFirstCode : table.next + 1;
  table.entries[static_cast<size_t>(code % kKeptCodes)] = CodeEntry{code, error_class, message};
  return code;
}

std::optional<CodeEntry> find_code(int code) {
  CodeTable& table = codes();
  std::lock_guard<std::mutex> lock(table.mutex);
  const CodeEntry& entry = table.entries[static_cast<size_t>(code % kKeptCodes)];
  if (code >= kFirstCode && entry.code == code) return entry;
  return std::nullopt;
}

bool valid_comm(MPI_Comm comm) { return comm != MPI_COMM_NULL && comm->magic == kCommMagic; }

void copy_string(const std::string& text, char* out, int* length, int capacity) {
  const size_t n = std::min(text.size(), static_cast<size_t>(capacity - 1));
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
  *length = static_cast<int>(n);
}

}  // namespace

const char* error_class_name(int error_class) {
  if (error_class < 0 || error_class > MPI_ERR_LASTCODE) return nullptr;
  return kErrorClasses[static_cast<size_t>(error_class)].name;
}

int error_class_of(chorus::Status status) {
  switch (status) {
    case chorus::Status::success: return MPI_SUCCESS;
    case chorus::Status::invalid_argument: return MPI_ERR_ARG;
    case chorus::Status::truncated: return MPI_ERR_TRUNCATE;
    case chorus::Status::unsupported: return MPI_ERR_UNSUPPORTED_OPERATION;
    case chorus::Status::internal: return MPI_ERR_INTERN;
    default: return MPI_ERR_OTHER;  // config, transport, timeout, peer failed, bootstrap, finalized
  }
}

[[noreturn]] void terminate_process(const std::string& message, int status) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(nullptr);
  _exit(status);
}

namespace {
std::atomic<uint64_t> raised{0};
}  // namespace

uint64_t errors_raised() { return raised.load(); }

namespace {
// `target`'s handler, for `code` (of `error_class`, saying `message`): a
// user's is called with the communicator and the code (copies: what it
// writes to them changes nothing, as in Open MPI), MPI_ERRORS_ARE_FATAL
// ends the job, MPI_ERRORS_RETURN does nothing.
void invoke_handler(MPI_Comm target, int code, int error_class, const std::string& message) {
  const MPI_Errhandler handler = target->errhandler;
  if (handler != nullptr && handler->function != nullptr) {
    MPI_Comm handle = target;
    int passed = code;
    handler->function(&handle, &passed);
    return;
  }
  if (handler == nullptr || handler->fatal) {
    const char* comm_name = target->predefined ? target->name : "a communicator";
    const int rank = world_rank();
    terminate_process(concat("chorus MPI: ", message, " (", error_class_name(error_class), ")\n",
                             "chorus MPI: MPI_ERRORS_ARE_FATAL on ", comm_name, ": rank ",
                             rank < 0 ? std::string("?") : std::to_string(rank),
                             " is terminating the job, as MPI_Abort would"),
                      error_class);
  }
}
}  // namespace

// MPI-3.1 8.3.1: the call returns the code once the handler returns.
int raise(MPI_Comm comm, int error_class, const std::string& message) {
  raised.fetch_add(1);
  const MPI_Comm target = valid_comm(comm) ? comm : MPI_COMM_WORLD;
  const int code = make_code(error_class, message);
  invoke_handler(target, code, error_class, message);
  return code;
}

void retain_errhandler(MPI_Errhandler errhandler) {
  if (errhandler != nullptr && errhandler->function != nullptr) errhandler->references.fetch_add(1);
}

void release_errhandler(MPI_Errhandler errhandler) {
  if (errhandler != nullptr && errhandler->function != nullptr && errhandler->references.fetch_sub(1) == 1) {
    delete errhandler;
  }
}

int unsupported(const char* function, MPI_Comm comm) {
  return raise(comm, MPI_ERR_UNSUPPORTED_OPERATION,
               concat(function, " is not supported by the chorus MPI subset (declared only; see docs/mpi.md)"));
}

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Error_class(int errorcode, int* errorclass) {
  return call<false>("MPI_Error_class", MPI_COMM_WORLD, [&] {
    if (errorclass == nullptr) fail(MPI_ERR_ARG, "null errorclass");
    if (errorcode >= 0 && errorcode <= MPI_ERR_LASTCODE) {
      *errorclass = errorcode;
    } else if (errorcode >= kFirstCode) {
      // Codes older than the kept ones are no longer known: say so, not crash.
      auto entry = find_code(errorcode);
      if (!entry) fail(MPI_ERR_ARG, "error code ", errorcode, " is too old to be remembered");
      *errorclass = entry->error_class;
    } else {
      fail(MPI_ERR_ARG, errorcode, " is not an MPI error code");
    }
  });
}

int MPI_Error_string(int errorcode, char* string, int* resultlen) {
  return call<false>("MPI_Error_string", MPI_COMM_WORLD, [&] {
    if (string == nullptr || resultlen == nullptr) fail(MPI_ERR_ARG, "null string or resultlen");
    std::string text;
    if (errorcode >= 0 && errorcode <= MPI_ERR_LASTCODE) {
      const ErrorClassInfo& info = kErrorClasses[static_cast<size_t>(errorcode)];
      text = concat(info.name, ": ", info.description);
    } else if (auto entry = find_code(errorcode)) {
      text = entry->message;
    } else {
      fail(MPI_ERR_ARG, errorcode, " is not an MPI error code (or too old to be remembered)");
    }
    copy_string(text, string, resultlen, MPI_MAX_ERROR_STRING);
  });
}

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  return call("MPI_Comm_set_errhandler", comm, [&] {
    use_comm(comm);
    if (errhandler == MPI_ERRHANDLER_NULL) fail(MPI_ERR_ARG, "MPI_ERRHANDLER_NULL is not an error handler");
    retain_errhandler(errhandler);
    release_errhandler(std::exchange(comm->errhandler, errhandler));
  });
}

int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function* comm_errhandler_fn, MPI_Errhandler* errhandler) {
  return call("MPI_Comm_create_errhandler", MPI_COMM_WORLD, [&] {
    if (comm_errhandler_fn == nullptr || errhandler == nullptr) fail(MPI_ERR_ARG, "null function or errhandler");
    *errhandler = new chorus_mpi_errhandler{false, "a user error handler", comm_errhandler_fn};
  });
}

// MPI-3.1 8.3.4: the communicator's handler, as an error of `errorcode`
// would call it; MPI_SUCCESS once it has returned.
int MPI_Comm_call_errhandler(MPI_Comm comm, int errorcode) {
  const int checked = call("MPI_Comm_call_errhandler", comm, [&] { use_comm(comm); });
  if (checked != MPI_SUCCESS) return checked;
  // Looked up here, not by MPI_Error_class/_string: an unknown code must
  // not raise an error of its own on MPI_COMM_WORLD.
  int error_class = MPI_ERR_OTHER;
  std::string what = concat("error code ", errorcode);
  if (errorcode >= 0 && errorcode <= MPI_ERR_LASTCODE) {
    const ErrorClassInfo& info = kErrorClasses[static_cast<size_t>(errorcode)];
    error_class = errorcode;
    what = concat(info.name, ": ", info.description);
  } else if (auto entry = find_code(errorcode)) {
    error_class = entry->error_class;
    what = entry->message;
  }
  invoke_handler(comm, errorcode, error_class, concat("MPI_Comm_call_errhandler: ", what));
  return MPI_SUCCESS;
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler* errhandler) {
  return call("MPI_Comm_get_errhandler", comm, [&] {
    use_comm(comm);
    if (errhandler == nullptr) fail(MPI_ERR_ARG, "null errhandler");
    retain_errhandler(comm->errhandler);  // the caller's, to MPI_Errhandler_free
    *errhandler = comm->errhandler;
  });
}

int MPI_Errhandler_free(MPI_Errhandler* errhandler) {
  return call("MPI_Errhandler_free", MPI_COMM_WORLD, [&] {
    if (errhandler == nullptr || *errhandler == MPI_ERRHANDLER_NULL) fail(MPI_ERR_ARG, "null errhandler");
    // A communicator that uses it keeps it; the predefined handlers live on.
    release_errhandler(std::exchange(*errhandler, MPI_ERRHANDLER_NULL));
  });
}

}  // extern "C"
