// Process state: MPI_Init / MPI_Finalize, the predefined communicators,
// MPI_Abort, timers, version and host queries.
#include "mpi/requests.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>
#include <thread>

extern "C" {
// Connected by MPI_Init; until then their chorus communicators are null.
struct chorus_mpi_comm chorus_mpi_comm_world = {chorus::mpi::kCommMagic, nullptr, nullptr,
                                                &chorus_mpi_errors_are_fatal, "MPI_COMM_WORLD", true, {}, {}};
struct chorus_mpi_comm chorus_mpi_comm_self = {chorus::mpi::kCommMagic, nullptr, nullptr,
                                               &chorus_mpi_errors_are_fatal, "MPI_COMM_SELF", true, {}, {}};
}

namespace chorus::mpi {

namespace {

struct State {
  std::mutex mutex;              // init, finalize and the registry
  bool initialized = false;
  bool finalized = false;
  int thread_level = MPI_THREAD_SINGLE;
  int world_rank = -1;
  std::thread::id main_thread;
  std::set<MPI_Comm> user_comms;  // from dup/split, released by MPI_Finalize
};

State& state() {
  static State* instance = new State();  // never destroyed: MPI may be used from atexit handlers
  return *instance;
}

// Provided thread level: every level up to MPI_THREAD_MULTIPLE. chorus'
// API is MPI_THREAD_MULTIPLE-safe (docs/api.md, "Threads": a waiting
// thread hands the engine's lock over), and the MPI layer's own shared
// state (the registry below, error codes, freed requests) has its locks.
constexpr int kMaxThreadLevel = MPI_THREAD_MULTIPLE;

void release(MPI_Comm comm) {
  delete comm->internal;
  delete comm->chorus;
  comm->internal = nullptr;
  comm->chorus = nullptr;
}

void initialize(int required, int* provided) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.finalized) fail(MPI_ERR_OTHER, "MPI cannot be initialized again after MPI_Finalize");
  if (s.initialized) fail(MPI_ERR_OTHER, "MPI is already initialized");
  if (required < MPI_THREAD_SINGLE || required > MPI_THREAD_MULTIPLE) {
    fail(MPI_ERR_ARG, "required thread level ", required, " is not one of MPI_THREAD_SINGLE..MPI_THREAD_MULTIPLE");
  }
  // World: the job's communicator. Self: a split by rank (one allgather),
  // so its context id is agreed like any other communicator's.
  auto world = std::make_unique<chorus::Communicator>(chorus::Communicator::init());
  auto world_internal = std::make_unique<chorus::Communicator>(world->dup());
  auto self = std::make_unique<chorus::Communicator>(std::move(*world->split(world->rank(), 0)));
  auto self_internal = std::make_unique<chorus::Communicator>(self->dup());
  s.world_rank = world->rank();
  chorus_mpi_comm_world.world_ranks.resize(static_cast<size_t>(world->size()));
  for (int r = 0; r < world->size(); ++r) chorus_mpi_comm_world.world_ranks[static_cast<size_t>(r)] = r;
  chorus_mpi_comm_self.world_ranks = {world->rank()};
  chorus_mpi_comm_world.rank = world->rank();
  chorus_mpi_comm_world.size = world->size();
  chorus_mpi_comm_self.rank = self->rank();
  chorus_mpi_comm_self.size = self->size();
  chorus_mpi_comm_world.chorus = world.release();
  chorus_mpi_comm_world.internal = world_internal.release();
  chorus_mpi_comm_self.chorus = self.release();
  chorus_mpi_comm_self.internal = self_internal.release();
  s.thread_level = std::min(required, kMaxThreadLevel);
  s.main_thread = std::this_thread::get_id();
  s.initialized = true;
  if (provided != nullptr) *provided = s.thread_level;
}

void finalize() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.initialized = false;
  s.finalized = true;
  // The world first (collective): it lets every outstanding operation, of
  // every communicator and MPI_Request_free'd ones too, complete, cancels
  // what is still unmatched after every rank has arrived and names it (a
  // sub-communicator freed first would wait for its own for CHORUS_TIMEOUT).
  std::unique_ptr<chorus::Communicator> world(chorus_mpi_comm_world.chorus);
  chorus_mpi_comm_world.chorus = nullptr;
  std::optional<chorus::Error> failure;
  try {
    world->finalize();
  } catch (const chorus::Error& e) {
    failure = e;
  }
  const std::optional<std::string> detached_error = settle_detached_requests();
  for (MPI_Comm comm : s.user_comms) {
    release(comm);
    release_errhandler(comm->errhandler);
    comm->magic = 0;
    delete comm;
  }
  s.user_comms.clear();
  release(MPI_COMM_SELF);
  delete chorus_mpi_comm_world.internal;
  chorus_mpi_comm_world.internal = nullptr;
  if (failure) throw *failure;
  if (detached_error) {
    fail(MPI_ERR_REQUEST, "a request given to MPI_Request_free failed and no call reported it: ", *detached_error);
  }
}

}  // namespace

bool initialized() { return state().initialized; }
bool finalized() { return state().finalized; }
int world_rank() { return state().world_rank; }

void register_comm(MPI_Comm comm) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().user_comms.insert(comm);
}

void unregister_comm(MPI_Comm comm) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().user_comms.erase(comm);
}

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Init(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  return call<false>("MPI_Init", MPI_COMM_WORLD, [&] { initialize(MPI_THREAD_SINGLE, nullptr); });
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  (void)argc;
  (void)argv;
  return call<false>("MPI_Init_thread", MPI_COMM_WORLD, [&] {
    if (provided == nullptr) fail(MPI_ERR_ARG, "null provided");
    initialize(required, provided);
  });
}

int MPI_Initialized(int* flag) {
  return call<false>("MPI_Initialized", MPI_COMM_WORLD, [&] {
    if (flag == nullptr) fail(MPI_ERR_ARG, "null flag");
    // True from MPI_Init on, also after MPI_Finalize (MPI-3.1 8.7).
    *flag = initialized() || finalized();
  });
}

// MPI_COMM_SELF goes first (MPI-3.1 8.7.1): its attributes' delete
// functions run while MPI still works, so a library can end its own
// communication there; outside finalize's lock, as they may call MPI.
int MPI_Finalize(void) {
  return call("MPI_Finalize", MPI_COMM_WORLD, [&] {
    if (initialized()) {
      delete_attributes(MPI_COMM_SELF);
      flush_buffered_sends();  // a buffered message is sent even if its buffer was never detached
    }
    finalize();
  });
}

int MPI_Finalized(int* flag) {
  return call<false>("MPI_Finalized", MPI_COMM_WORLD, [&] {
    if (flag == nullptr) fail(MPI_ERR_ARG, "null flag");
    *flag = finalized();
  });
}

int MPI_Query_thread(int* provided) {
  return call("MPI_Query_thread", MPI_COMM_WORLD, [&] {
    if (provided == nullptr) fail(MPI_ERR_ARG, "null provided");
    *provided = state().thread_level;
  });
}

int MPI_Is_thread_main(int* flag) {
  return call("MPI_Is_thread_main", MPI_COMM_WORLD, [&] {
    if (flag == nullptr) fail(MPI_ERR_ARG, "null flag");
    *flag = std::this_thread::get_id() == state().main_thread;
  });
}

int MPI_Abort(MPI_Comm comm, int errorcode) {
  // Every rank of the job ends, not just those of `comm`: chorusrun (and
  // mpirun) stop all ranks when one exits non-zero. Exit status: errorcode
  // when it is 1..255, else 1, so the launcher sees a failure.
  (void)comm;
  const int status = errorcode >= 1 && errorcode <= 255 ? errorcode : 1;
  const int rank = world_rank();
  terminate_process(concat("chorus MPI: MPI_Abort(errorcode ", errorcode, ") called on rank ",
                           rank < 0 ? std::string("?") : std::to_string(rank), "; terminating the job"),
                    status);
}

double MPI_Wtime(void) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

double MPI_Wtick(void) {
  timespec resolution{};
  if (clock_getres(CLOCK_MONOTONIC, &resolution) != 0) return 1e-6;
  return static_cast<double>(resolution.tv_sec) + 1e-9 * static_cast<double>(resolution.tv_nsec);
}

int MPI_Get_version(int* version, int* subversion) {
  return call<false>("MPI_Get_version", MPI_COMM_WORLD, [&] {
    if (version == nullptr || subversion == nullptr) fail(MPI_ERR_ARG, "null version or subversion");
    *version = MPI_VERSION;
    *subversion = MPI_SUBVERSION;
  });
}

int MPI_Get_library_version(char* version, int* resultlen) {
  return call<false>("MPI_Get_library_version", MPI_COMM_WORLD, [&] {
    if (version == nullptr || resultlen == nullptr) fail(MPI_ERR_ARG, "null version or resultlen");
    const std::string text = concat("chorus MPI subset (MPI ", MPI_VERSION, ".", MPI_SUBVERSION, ")");
    std::snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING, "%s", text.c_str());
    *resultlen = static_cast<int>(std::strlen(version));
  });
}

int MPI_Get_processor_name(char* name, int* resultlen) {
  return call("MPI_Get_processor_name", MPI_COMM_WORLD, [&] {
    if (name == nullptr || resultlen == nullptr) fail(MPI_ERR_ARG, "null name or resultlen");
    char host[MPI_MAX_PROCESSOR_NAME] = {0};
    if (gethostname(host, sizeof host - 1) != 0) fail(MPI_ERR_OTHER, "gethostname failed");
    std::snprintf(name, MPI_MAX_PROCESSOR_NAME, "%s", host);
    *resultlen = static_cast<int>(std::strlen(name));
  });
}

int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr) {
  (void)info;
  return call("MPI_Alloc_mem", MPI_COMM_WORLD, [&] {
    if (size < 0) fail(MPI_ERR_SIZE, "negative size ", size);
    if (baseptr == nullptr) fail(MPI_ERR_ARG, "null baseptr");
    void* memory = std::malloc(size == 0 ? 1 : static_cast<size_t>(size));
    if (memory == nullptr) fail(MPI_ERR_NO_MEM, "could not allocate ", size, " bytes");
    *static_cast<void**>(baseptr) = memory;
  });
}

int MPI_Free_mem(void* base) {
  return call("MPI_Free_mem", MPI_COMM_WORLD, [&] { std::free(base); });
}

}  // extern "C"
