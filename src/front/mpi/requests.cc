// MPI_Request: completion (MPI_Wait*, MPI_Test*), MPI_Request_free and the
// requests freed before they completed. Starting operations is in
// nonblocking.cc (point-to-point) and icollectives.cc.
#include "api/wait_any_of.hpp"
#include "common/recycling_allocator.hpp"
#include "mpi/requests.hpp"

#include <algorithm>
#include <list>
#include <mutex>
#include <thread>

namespace chorus::mpi {

namespace {

// Requests freed while active, completed by later calls. Any thread may
// call (MPI_THREAD_MULTIPLE): the list has its own lock.
struct Detached {
  std::mutex mutex;
  std::list<RequestPtr> requests;
  // The first error a freed request met, with errors_raised() at that time:
  // MPI_Finalize reports it unless an MPI call has reported an error since.
  std::optional<std::string> first_error;
  uint64_t raised_before = 0;
};
Detached& detached() {
  static Detached* list = new Detached();  // never destroyed: MPI may be used from atexit handlers
  return *list;
}

// Its buffers must live until it completes.
void detach(RequestPtr request) {
  std::lock_guard lock(detached().mutex);
  detached().requests.push_back(std::move(request));
}

chorus_mpi_request& use_request(MPI_Request request) {
  if (request->magic != kRequestMagic) fail(MPI_ERR_REQUEST, "invalid request handle (freed, or not a request)");
  return *request;
}

// The communicator whose error handler a call on these requests uses: the
// first valid request's (MPI_COMM_WORLD if none).
MPI_Comm comm_of(int count, const MPI_Request* requests) {
  if (requests == nullptr) return MPI_COMM_WORLD;
  for (int i = 0; i < count; ++i) {
    if (requests[i] != MPI_REQUEST_NULL && requests[i]->magic == kRequestMagic) return requests[i]->comm;
  }
  return MPI_COMM_WORLD;
}

void check_array(int count, const MPI_Request* requests) {
  if (count < 0) fail(MPI_ERR_COUNT, "count ", count, " is negative");
  if (count > 0 && requests == nullptr) fail(MPI_ERR_REQUEST, "null array of requests");
  for (int i = 0; i < count; ++i) {
    if (requests[i] != MPI_REQUEST_NULL) use_request(requests[i]);
  }
}

MPI_Status* status_at(MPI_Status* statuses, size_t index) {
  return statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[index];
}

// A finished operation (its chorus::Request empty): stages out its data,
// fills the status and frees the request.
void settle(chorus_mpi_request& request, MPI_Status* status) {
  if (request.extra && request.extra->failed) throw *std::exchange(request.extra->failed, std::nullopt);
  if (request.cancelled) {
    set_empty_status(status);
    if (status != MPI_STATUS_IGNORE) status->chorus_cancelled = 1;
    return;
  }
  const chorus::Received got = request.operation.received();
  if (request.extra && request.extra->finish) request.extra->finish(got);
  if (request.from_proc_null) {
    set_status(status, MPI_PROC_NULL, MPI_ANY_TAG, 0);
  } else if (request.receive) {
    set_status(status, got.source, got.tag, got.bytes);
  } else {
    set_empty_status(status);
  }
}

void release(MPI_Request& handle) {
  if (handle->active()) {
    // A part failed while others are outstanding (tested in order, the
    // later ones were not waited for): their buffers are the request's, so
    // it lives on, detached, without its completion step.
    if (handle->extra) handle->extra->finish = nullptr;
    detach(RequestPtr(handle));
    handle = MPI_REQUEST_NULL;
    return;
  }
  if (handle->persistent) {
    // Inactive again, its handle the caller's to start or free.
    handle->started = false;
    handle->extra.reset();
    return;
  }
  RequestPtr owned(handle);
  owned->magic = 0;
  handle = MPI_REQUEST_NULL;
}

// A completion step that fails (a neighbourhood collective's block of the
// wrong size) still frees the request.
void complete(MPI_Request& handle, MPI_Status* status) {
  try {
    settle(*handle, status);
  } catch (...) {
    release(handle);
    throw;
  }
  release(handle);
}

// Tests a request of parts (RequestStaging::parts) in order: the first
// unfinished part, and the next ones while they finish.
bool test_parts(chorus::mpi::RequestStaging& staging) {
  while (staging.parts_done < staging.parts.size()) {
    chorus::Request& part = staging.parts[staging.parts_done];
    bool done = false;
    try {
      done = part.test();
    } catch (...) {
      ++staging.parts_done;  // reported: the parts after it go on
      throw;
    }
    if (!done) return false;
    ++staging.parts_done;
  }
  return true;
}

bool test_request(chorus_mpi_request& request) {
  return request.extra && request.extra->has_parts() ? test_parts(*request.extra) : request.operation.test();
}

// Waits for a request's operation, or for every one of its parts, even
// after one fails (their buffers are the request's); the first failure is
// rethrown.
void wait_request(chorus_mpi_request& request) {
  if (!request.extra || !request.extra->has_parts()) return request.operation.wait();
  chorus::mpi::RequestStaging& staging = *request.extra;
  std::optional<chorus::Error> first;
  for (; staging.parts_done < staging.parts.size(); ++staging.parts_done) {
    try {
      staging.parts[staging.parts_done].wait();
    } catch (const chorus::Error& error) {
      if (!first) first = error;
    }
  }
  if (first) throw *first;
}

// Runs one test of `handle`'s operation unless it has finished; a failure
// frees the request (as chorus' own requests: it has been reported) and is
// rethrown.
bool test_operation(MPI_Request& handle) {
  if (!handle->active()) return true;
  try {
    return test_request(*handle);
  } catch (...) {
    release(handle);
    throw;
  }
}

// Progress for the freed requests: completes those that finished.
void reap_detached() {
  // One thread reaps at a time; the others have their own work to do.
  std::unique_lock lock(detached().mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;
  auto& list = detached().requests;
  for (auto it = list.begin(); it != list.end();) {
    bool done = true;
    try {
      done = test_request(**it);
      if (done) settle(**it, MPI_STATUS_IGNORE);
    } catch (const std::exception& e) {
      done = !(*it)->active();  // a request of parts waits for the rest
      // chorus reports the failure on the communicator's next call, or
      // MPI_Finalize does.
      if (!detached().first_error) {
        detached().first_error = e.what();
        detached().raised_before = errors_raised();
      }
    }
    it = done ? list.erase(it) : std::next(it);
  }
}

// MPI_Waitany's work: the index completed, or MPI_UNDEFINED if none is active.
// A request of parts is waited for by its first unfinished part, and
// completes once the others have finished too.
int wait_any(int count, MPI_Request* requests, MPI_Status* status) {
  auto waited_for = [&](size_t i) -> chorus::Request* {
    chorus_mpi_request* request = requests[i];
    if (chorus_mpi_request::inactive(request)) return nullptr;
    if (!request->extra || !request->extra->has_parts()) return &request->operation;
    chorus::mpi::RequestStaging& staging = *request->extra;
    return staging.parts_done < staging.parts.size() ? &staging.parts[staging.parts_done] : &request->operation;
  };
  for (;;) {
    const auto done = chorus::wait_any_of(static_cast<size_t>(count), waited_for,
                                          [&](size_t i) { release(requests[i]); });
    if (!done) {
      set_empty_status(status);
      return MPI_UNDEFINED;
    }
    if (test_operation(requests[*done])) {
      complete(requests[*done], status);
      return static_cast<int>(*done);
    }
  }
}

// Tests every active request once; returns the indices that completed.
std::vector<int> test_some(int count, MPI_Request* requests, MPI_Status* statuses, bool* any_active) {
  std::vector<int> done;
  *any_active = false;
  for (int i = 0; i < count; ++i) {
    if (chorus_mpi_request::inactive(requests[i])) continue;
    *any_active = true;
    if (test_operation(requests[i])) {
      complete(requests[i], status_at(statuses, done.size()));
      done.push_back(i);
    }
  }
  return done;
}

// MPI_Waitsome / MPI_Testsome: checks, outcount MPI_UNDEFINED until known.
void check_some_arguments(int incount, const MPI_Request* requests, int* outcount, const int* indices) {
  check_array(incount, requests);
  if (outcount == nullptr || (incount > 0 && indices == nullptr)) fail(MPI_ERR_ARG, "null outcount or array_of_indices");
  *outcount = MPI_UNDEFINED;
  reap_detached();
}

void write_indices(const std::vector<int>& done, int* outcount, int* indices) {
  *outcount = static_cast<int>(done.size());
  std::copy(done.begin(), done.end(), indices);
}

}  // namespace

void refuse_request_output() { fail(MPI_ERR_ARG, "null request pointer"); }

void detach_request(RequestPtr request) { detach(std::move(request)); }

void wait_unpublished(chorus_mpi_request& request, MPI_Status* status) {
  wait_request(request);
  settle(request, status);
}

std::optional<std::string> settle_detached_requests() {
  std::lock_guard lock(detached().mutex);
  // After the world's finalize: each one has completed or was cancelled
  // (finalize named those), so testing does not wait.
  for (RequestPtr& request : detached().requests) {
    try {
      if (test_request(*request)) settle(*request, MPI_STATUS_IGNORE);
    } catch (const std::exception&) {
      // Cancelled or failed: the world's finalize reported it.
    }
  }
  detached().requests.clear();
  std::optional<std::string> error = std::move(detached().first_error);
  detached().first_error.reset();
  if (error && errors_raised() != detached().raised_before) error.reset();  // reported by a later call
  return error;
}

}  // namespace chorus::mpi

// Recycled like chorus' own request objects (common/recycling_allocator.hpp);
// a derived class's larger object goes to the heap.
void* chorus_mpi_request::operator new(size_t bytes) {
  if (bytes == sizeof(chorus_mpi_request)) return chorus::RecyclingAllocator<chorus_mpi_request>().allocate(1);
  return ::operator new(bytes);
}

void chorus_mpi_request::operator delete(void* memory, size_t bytes) noexcept {
  if (memory == nullptr) return;
  if (bytes == sizeof(chorus_mpi_request)) {
    return chorus::RecyclingAllocator<chorus_mpi_request>().deallocate(static_cast<chorus_mpi_request*>(memory), 1);
  }
  ::operator delete(memory, bytes);
}

using namespace chorus::mpi;

extern "C" {

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  return call("MPI_Wait", comm_of(1, request), [&] {
    if (request == nullptr) fail(MPI_ERR_REQUEST, "null request pointer");
    reap_detached();
    if (*request != MPI_REQUEST_NULL) use_request(*request);
    if (chorus_mpi_request::inactive(*request)) return set_empty_status(status);
    try {
      wait_request(**request);
    } catch (...) {
      release(*request);
      throw;
    }
    complete(*request, status);
  });
}

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  return call("MPI_Test", comm_of(1, request), [&] {
    if (request == nullptr || flag == nullptr) fail(MPI_ERR_ARG, "null request or flag pointer");
    *flag = 0;
    reap_detached();
    if (*request != MPI_REQUEST_NULL) use_request(*request);
    if (chorus_mpi_request::inactive(*request)) {
      *flag = 1;
      return set_empty_status(status);
    }
    if (test_operation(*request)) {
      complete(*request, status);
      *flag = 1;
    }
  });
}

int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]) {
  return call("MPI_Waitall", comm_of(count, array_of_requests), [&] {
    check_array(count, array_of_requests);
    reap_detached();
    std::optional<Failure> first;
    for (int i = 0; i < count; ++i) {
      MPI_Status* status = status_at(array_of_statuses, static_cast<size_t>(i));
      MPI_Request& handle = array_of_requests[i];
      if (chorus_mpi_request::inactive(handle)) {
        set_empty_status(status);
        continue;
      }
      try {
        wait_request(*handle);
        complete(handle, status);
      } catch (const chorus::Error& error) {
        if (handle != MPI_REQUEST_NULL) release(handle);  // complete() frees it even when it fails
        const int error_class = error_class_of(error.status());
        if (status != MPI_STATUS_IGNORE) status->MPI_ERROR = error_class;
        if (!first) first = Failure{error_class, concat("request ", i, ": ", error.what())};
      }
    }
    if (!first) return;
    // MPI-3.1 3.7.5: with statuses, each one says which request failed.
    if (array_of_statuses != MPI_STATUSES_IGNORE) first->error_class = MPI_ERR_IN_STATUS;
    throw *first;
  });
}

int MPI_Testall(int count, MPI_Request array_of_requests[], int* flag, MPI_Status array_of_statuses[]) {
  return call("MPI_Testall", comm_of(count, array_of_requests), [&] {
    check_array(count, array_of_requests);
    if (flag == nullptr) fail(MPI_ERR_ARG, "null flag pointer");
    *flag = 0;
    reap_detached();
    // An operation that finishes stays in its request until all have
    // (MPI: Testall completes all or none).
    bool all = true;
    for (int i = 0; i < count; ++i) {
      MPI_Request& handle = array_of_requests[i];
      if (!chorus_mpi_request::inactive(handle) && handle->active()) all = test_operation(handle) && all;
    }
    if (!all) return;
    for (int i = 0; i < count; ++i) {
      MPI_Status* status = status_at(array_of_statuses, static_cast<size_t>(i));
      if (chorus_mpi_request::inactive(array_of_requests[i])) {
        set_empty_status(status);
      } else {
        complete(array_of_requests[i], status);
      }
    }
    *flag = 1;
  });
}

int MPI_Waitany(int count, MPI_Request array_of_requests[], int* index, MPI_Status* status) {
  return call("MPI_Waitany", comm_of(count, array_of_requests), [&] {
    check_array(count, array_of_requests);
    if (index == nullptr) fail(MPI_ERR_ARG, "null index pointer");
    *index = MPI_UNDEFINED;
    reap_detached();
    *index = wait_any(count, array_of_requests, status);
  });
}

int MPI_Testany(int count, MPI_Request array_of_requests[], int* index, int* flag, MPI_Status* status) {
  return call("MPI_Testany", comm_of(count, array_of_requests), [&] {
    check_array(count, array_of_requests);
    if (index == nullptr || flag == nullptr) fail(MPI_ERR_ARG, "null index or flag pointer");
    *index = MPI_UNDEFINED;
    *flag = 0;
    reap_detached();
    bool any_active = false;
    for (int i = 0; i < count; ++i) {
      MPI_Request& handle = array_of_requests[i];
      if (chorus_mpi_request::inactive(handle)) continue;
      any_active = true;
      if (test_operation(handle)) {
        complete(handle, status);
        *index = i;
        *flag = 1;
        return;
      }
    }
    if (!any_active) {
      *flag = 1;  // MPI: no active request is a completed test with index MPI_UNDEFINED
      set_empty_status(status);
    }
  });
}

int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int* outcount, int array_of_indices[],
                 MPI_Status array_of_statuses[]) {
  return call("MPI_Waitsome", comm_of(incount, array_of_requests), [&] {
    check_some_arguments(incount, array_of_requests, outcount, array_of_indices);
    const int first = wait_any(incount, array_of_requests, status_at(array_of_statuses, 0));
    if (first == MPI_UNDEFINED) return;
    // Whatever else has completed by now comes along.
    bool any_active = false;
    std::vector<int> rest = test_some(incount, array_of_requests,
                                      array_of_statuses == MPI_STATUSES_IGNORE ? MPI_STATUSES_IGNORE
                                                                               : array_of_statuses + 1,
                                      &any_active);
    rest.insert(rest.begin(), first);
    write_indices(rest, outcount, array_of_indices);
  });
}

int MPI_Testsome(int incount, MPI_Request array_of_requests[], int* outcount, int array_of_indices[],
                 MPI_Status array_of_statuses[]) {
  return call("MPI_Testsome", comm_of(incount, array_of_requests), [&] {
    check_some_arguments(incount, array_of_requests, outcount, array_of_indices);
    bool any_active = false;
    std::vector<int> done = test_some(incount, array_of_requests, array_of_statuses, &any_active);
    if (any_active) write_indices(done, outcount, array_of_indices);
  });
}

int MPI_Request_free(MPI_Request* request) {
  return call("MPI_Request_free", comm_of(1, request), [&] {
    if (request == nullptr) fail(MPI_ERR_ARG, "null request pointer");
    if (*request == MPI_REQUEST_NULL) fail(MPI_ERR_REQUEST, "MPI_REQUEST_NULL cannot be freed");
    use_request(*request);
    RequestPtr owned(*request);
    *request = MPI_REQUEST_NULL;
    if (chorus_mpi_request::inactive(owned.get())) {  // a persistent one not started: nothing to settle
      owned->magic = 0;
      return;
    }
    // A started persistent request completes detached, as any other.
    owned->persistent.reset();
    if (!owned->active()) {
      settle(*owned, MPI_STATUS_IGNORE);
      return;
    }
    detach(std::move(owned));
    reap_detached();
  });
}

// MPI-3.1 3.8.4. A receive no message has matched is withdrawn (the wait
// that completes it reports it cancelled); any other point-to-point
// request completes as it would have (Open MPI 4.1 cancels no send either):
// MPI_Test_cancelled then says false. A collective's is refused, as the
// standard makes it erroneous.
int MPI_Cancel(MPI_Request* request) {
  return call("MPI_Cancel", comm_of(1, request), [&] {
    if (request == nullptr) fail(MPI_ERR_ARG, "null request pointer");
    if (*request == MPI_REQUEST_NULL) fail(MPI_ERR_REQUEST, "MPI_REQUEST_NULL cannot be cancelled");
    chorus_mpi_request& r = use_request(*request);
    if (r.collective) fail(MPI_ERR_REQUEST, "a non-blocking collective's request cannot be cancelled (MPI-3.1 5.12)");
    if (chorus_mpi_request::inactive(&r)) fail(MPI_ERR_REQUEST, "the persistent request is not active (MPI_Start it first)");
    reap_detached();
    if (r.receive && !r.from_proc_null && r.operation.active() && r.operation.cancel()) r.cancelled = true;
  });
}

int MPI_Test_cancelled(const MPI_Status* status, int* flag) {
  return call("MPI_Test_cancelled", MPI_COMM_WORLD, [&] {
    if (status == nullptr || flag == nullptr) fail(MPI_ERR_ARG, "null status or flag pointer");
    *flag = status->chorus_cancelled != 0;
  });
}

// MPI_Test without freeing the request (MPI-3.1 3.7.6): a finished
// operation's data is staged out now and its status filled; the request
// stays, for a wait or test that frees it and gives the same status. A
// failure is reported here and again by that wait or test.
int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  return call("MPI_Request_get_status", request != MPI_REQUEST_NULL && request->magic == kRequestMagic
                                            ? request->comm
                                            : MPI_COMM_WORLD,
              [&] {
                if (flag == nullptr) fail(MPI_ERR_ARG, "null flag pointer");
                *flag = 0;
                reap_detached();
                if (request != MPI_REQUEST_NULL) use_request(request);
                if (chorus_mpi_request::inactive(request)) {
                  *flag = 1;
                  return set_empty_status(status);
                }
                chorus_mpi_request& r = *request;
                if (r.extra && r.extra->failed) {
                  *flag = 1;
                  throw *r.extra->failed;
                }
                bool done = !r.active();
                if (!done) {
                  try {
                    done = test_request(r);
                  } catch (const chorus::Error& error) {
                    // Kept for the wait or test that frees it (a request of
                    // parts waits for the others first).
                    r.staging().failed = error;
                    *flag = 1;
                    throw;
                  }
                }
                if (!done) return;
                *flag = 1;
                settle(r, status);
                // Staged out once: the wait that frees it only fills the status.
                if (r.extra) r.extra->finish = nullptr;
              });
}

}  // extern "C"
