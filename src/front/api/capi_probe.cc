// The C API's probes: chorus_iprobe / chorus_probe look at a message without
// taking it; chorus_improbe / chorus_mprobe take it for chorus_mrecv /
// chorus_imrecv (capi_nonblocking.cc) alone (CommunicatorImpl::probe_once).
#include "api/capi_internal.hpp"

#include <chorus/chorus.h>

using namespace chorus::capi;

namespace {

void fill_message(chorus_message_t& out, chorus_comm_t comm, const chorus::Message& message) {
  out.comm = comm;
  out.info = chorus_received_t{message.info.source, message.info.tag, message.info.bytes};
  out.id = message.id;
}

chorus_message_t& checked_message(chorus_message_t* message, const char* what) {
  if (message == nullptr) chorus::fail(chorus::Status::invalid_argument, what, ": null message pointer");
  *message = chorus_message_t{nullptr, {-1, -1, 0}, 0};
  return *message;
}

}  // namespace

extern "C" {

chorus_status_t chorus_iprobe(chorus_comm_t comm, int peer, int tag, int* flag, chorus_received_t* received) {
  return guard([&] {
    if (flag == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_iprobe: null flag pointer");
    *flag = 0;
    fill_received(received, chorus::Received{});
    if (auto found = impl_of(comm).iprobe(peer, tag)) {
      *flag = 1;
      fill_received(received, *found);
    }
  });
}

chorus_status_t chorus_probe(chorus_comm_t comm, int peer, int tag, chorus_received_t* received) {
  return guard([&] {
    fill_received(received, chorus::Received{});
    fill_received(received, impl_of(comm).probe(peer, tag));
  });
}

chorus_status_t chorus_improbe(chorus_comm_t comm, int peer, int tag, int* flag, chorus_message_t* message) {
  return guard([&] {
    if (flag == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_improbe: null flag pointer");
    *flag = 0;
    chorus_message_t& out = checked_message(message, "chorus_improbe");
    if (auto found = impl_of(comm).improbe(peer, tag)) {
      *flag = 1;
      fill_message(out, comm, *found);
    }
  });
}

chorus_status_t chorus_mprobe(chorus_comm_t comm, int peer, int tag, chorus_message_t* message) {
  return guard([&] {
    chorus_message_t& out = checked_message(message, "chorus_mprobe");
    fill_message(out, comm, impl_of(comm).mprobe(peer, tag));
  });
}

}  // extern "C"
