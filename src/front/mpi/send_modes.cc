// The synchronous and buffered send modes (MPI-3.1 3.4, 3.6): MPI_Ssend,
// MPI_Issend, MPI_Ssend_init on chorus' synchronous send (the rendezvous
// protocol whatever the size: the send completes once the receiver has
// matched it), and MPI_Bsend, MPI_Ibsend, MPI_Bsend_init with
// MPI_Buffer_attach/_detach. A buffered send packs its message into a
// copy of its own, charged against the attached buffer (its bytes plus
// MPI_BSEND_OVERHEAD), sends from the copy and completes at once; the
// charge is returned when the copy's send completes. The attached memory
// itself is not written: what MPI asks of it, a bound on what buffered
// sends may hold, is kept by the count.
#include "mpi/requests.hpp"

#include <list>
#include <mutex>

namespace chorus::mpi {
namespace {

struct BufferedSend {
  chorus::Request send;
  Bytes copy;
  size_t charged;
};

// Any thread may send (MPI_THREAD_MULTIPLE): one lock for the buffer.
struct Attached {
  std::mutex mutex;
  void* buffer = nullptr;
  size_t size = 0;
  bool attached = false;
  size_t used = 0;
  std::list<BufferedSend> sends;
};
Attached& attached() {
  static Attached* state = new Attached();  // never destroyed: MPI may be used from atexit handlers
  return *state;
}

// Returns the charge of the buffered sends that have completed. A failed
// one failed its communicator, whose next call reports it.
void reap(Attached& a) {
  for (auto it = a.sends.begin(); it != a.sends.end();) {
    bool done = true;
    try {
      done = it->send.test();
    } catch (const chorus::Error&) {
      done = true;
    }
    if (!done) {
      ++it;
      continue;
    }
    a.used -= it->charged;
    it = a.sends.erase(it);
  }
}

// Waits for every buffered send (MPI_Buffer_detach, MPI_Finalize).
void drain(Attached& a) {
  for (BufferedSend& pending : a.sends) {
    try {
      pending.send.wait();
    } catch (const chorus::Error&) {
      // Reported by its communicator's next call.
    }
  }
  a.sends.clear();
  a.used = 0;
}

}  // namespace

RequestPtr start_buffered_send(const Comm& comm, const void* buf, size_t count, const Datatype& type, int dest,
                               int tag) {
  Bytes copy = pack_copy(buf, count, type);
  const size_t charge = copy.size() + MPI_BSEND_OVERHEAD;
  RequestPtr request = new_request(comm.handle);  // complete as returned: nothing to wait for
  Attached& a = attached();
  std::lock_guard lock(a.mutex);
  reap(a);
  if (!a.attached || a.size - a.used < charge) {
    fail(MPI_ERR_BUFFER, "a buffered send of ", copy.size(), " bytes needs ", charge, " bytes of the attached buffer; ",
         a.attached ? concat(a.size - a.used, " of ", a.size, " are free") : std::string("none is attached"),
         " (MPI_Buffer_attach, MPI_Pack_size + MPI_BSEND_OVERHEAD per message)");
  }
  BufferedSend& pending = a.sends.emplace_back(BufferedSend{chorus::Request{}, std::move(copy), charge});
  try {
    pending.send = comm.chorus.isend(pending.copy.data(), pending.copy.size(), dest, tag);
  } catch (...) {
    a.sends.pop_back();
    throw;
  }
  a.used += charge;
  return request;
}

void flush_buffered_sends() {
  Attached& a = attached();
  std::lock_guard lock(a.mutex);
  drain(a);
}

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Buffer_attach(void* buffer, int size) {
  return call("MPI_Buffer_attach", MPI_COMM_WORLD, [&] {
    if (size < 0) fail(MPI_ERR_ARG, "size ", size, " is negative");
    if (buffer == nullptr && size > 0) fail(MPI_ERR_BUFFER, "null buffer of ", size, " bytes");
    Attached& a = attached();
    std::lock_guard lock(a.mutex);
    if (a.attached) fail(MPI_ERR_BUFFER, "a buffer is already attached (MPI_Buffer_detach it first)");
    a.buffer = buffer;
    a.size = static_cast<size_t>(size);
    a.attached = true;
  });
}

// Blocks until every buffered message has been sent (MPI-3.1 3.6.1).
int MPI_Buffer_detach(void* buffer_addr, int* size) {
  return call("MPI_Buffer_detach", MPI_COMM_WORLD, [&] {
    if (buffer_addr == nullptr || size == nullptr) fail(MPI_ERR_ARG, "null buffer_addr or size");
    Attached& a = attached();
    std::lock_guard lock(a.mutex);
    if (!a.attached) fail(MPI_ERR_BUFFER, "no buffer is attached");
    drain(a);
    *static_cast<void**>(buffer_addr) = a.buffer;
    *size = static_cast<int>(a.size);
    a.buffer = nullptr;
    a.size = 0;
    a.attached = false;
  });
}

int MPI_Bsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return call("MPI_Bsend", comm, [&] { start_send(use_comm(comm), buf, count, datatype, dest, tag, SendMode::buffered); });
}

int MPI_Ibsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  return call("MPI_Ibsend", comm, [&] {
    check_request_output(request);
    publish(start_send(use_comm(comm), buf, count, datatype, dest, tag, SendMode::buffered), request);
  });
}

int MPI_Ssend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return call("MPI_Ssend", comm, [&] {
    RequestPtr send = start_send(use_comm(comm), buf, count, datatype, dest, tag, SendMode::synchronous);
    wait_unpublished(*send, MPI_STATUS_IGNORE);
  });
}

int MPI_Issend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  return call("MPI_Issend", comm, [&] {
    check_request_output(request);
    publish(start_send(use_comm(comm), buf, count, datatype, dest, tag, SendMode::synchronous), request);
  });
}

int MPI_Bsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return call("MPI_Bsend_init", comm, [&] {
    check_request_output(request);
    publish(new_persistent_send(comm, buf, count, datatype, dest, tag, SendMode::buffered), request);
  });
}

int MPI_Ssend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return call("MPI_Ssend_init", comm, [&] {
    check_request_output(request);
    publish(new_persistent_send(comm, buf, count, datatype, dest, tag, SendMode::synchronous), request);
  });
}

}  // extern "C"
