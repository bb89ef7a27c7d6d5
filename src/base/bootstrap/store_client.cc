// The store client: one blocking-style connection driven by poll() against a
// deadline, so every call ends within the timeout it was given.
#include "bootstrap/frame.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

#include <algorithm>
#include <cerrno>
#include <poll.h>
#include <set>
#include <sys/socket.h>
#include <thread>

namespace chorus::bootstrap {

using frame::Frame;
using frame::Type;
using net::Clock;

namespace {

constexpr auto kFirstRetryDelay = std::chrono::milliseconds(10);
constexpr auto kMaxRetryDelay = std::chrono::milliseconds(200);
constexpr auto kFailureCheckInterval = std::chrono::seconds(1);
// A chorus store answers HELLO at once; a listener that has not within this
// time is something else (torchrun's own store at MASTER_PORT, ...).
constexpr auto kHelloAnswerTime = std::chrono::seconds(3);

std::string quoted_key(const std::string& key) { return concat("key \"", key, "\""); }

}  // namespace

class StoreClient::Impl {
 public:
  Impl(const std::string& host, uint16_t port, const std::string& secret, std::chrono::milliseconds timeout,
       std::chrono::milliseconds connect_within);

  void set(const std::string& key, const Bytes& value);
  Bytes get(const std::string& key, Clock::time_point deadline);
  Bytes get(const std::string& key) { return get(key, deadline()); }
  int64_t add(const std::string& key, int64_t delta);
  bool check(const std::string& key);
  Clock::time_point deadline() const { return Clock::now() + timeout_; }
  void set_failure_check(std::function<std::optional<Error>()> failure) { failure_ = std::move(failure); }
  void set_served_by(int rank) { served_by_ = rank; }

 private:
  void connect(const std::string& host, uint16_t port, Clock::time_point deadline);
  Bytes get_until(const std::string& key, Clock::time_point deadline);
  // Sends `request` and returns the reply with its id; `what` describes the
  // call for error messages ("waiting for key \"a\"").
  Frame call(Frame request, Type expected, Clock::time_point deadline, const std::string& what);
  void send_all(const Bytes& bytes, Clock::time_point deadline, const std::string& what);
  Frame receive_reply(uint32_t id, Clock::time_point deadline, const std::string& what);
  void receive_more(Clock::time_point deadline, const std::string& what);
  [[noreturn]] void timed_out(const std::string& what);
  [[noreturn]] void broken(const std::string& why);
  uint32_t next_id();

  std::string address_;
  std::chrono::milliseconds timeout_;
  net::Fd fd_;
  frame::Decoder decoder_;
  uint32_t last_id_ = 0;
  std::set<uint32_t> abandoned_;  // ids whose caller timed out; late replies are dropped
  std::string broken_;            // why the stream can no longer be trusted
  int served_by_ = -1;            // the rank whose process serves the store, if one does
  std::function<std::optional<Error>()> failure_;  // see set_failure_check
  bool asking_failure_ = false;   // inside failure_: plain waits
  bool answered_ = false;         // a well-formed frame arrived: the peer speaks our protocol
};

StoreClient::Impl::Impl(const std::string& host, uint16_t port, const std::string& secret,
                        std::chrono::milliseconds timeout, std::chrono::milliseconds connect_within)
    : address_(net::format_address(host, port)), timeout_(timeout) {
  if (timeout <= std::chrono::milliseconds(0) || connect_within <= std::chrono::milliseconds(0)) {
    fail(Status::invalid_argument, "the store client timeout must be positive, got ", timeout.count(), " ms (",
         connect_within.count(), " ms to connect)");
  }
  const auto until = Clock::now() + std::min(timeout, connect_within);
  connect(host, port, until);
  try {
    call(Frame::hello(next_id(), secret), Type::ok, std::min(until, Clock::now() + kHelloAnswerTime),
         "presenting the job secret");
  } catch (const Error& e) {
    if (answered_) throw;  // a chorus store refused us, and said why
    fail(Status::bootstrap, "the listener at ", address_, " is not a chorus bootstrap store (", e.what(),
         "): another program uses this port. Under torchrun, MASTER_PORT is torchrun's own store (chorus uses "
         "MASTER_PORT+1 there); otherwise point every rank at a free port with CHORUS_STORE_ADDR=host:port");
  }
}

void StoreClient::Impl::connect(const std::string& host, uint16_t port, Clock::time_point deadline) {
  // The server may not be up yet (rank 0 still starting): retry with backoff.
  auto delay = kFirstRetryDelay;
  std::string why = "no attempt finished";
  const auto start = Clock::now();
  auto next_report = start + startup_report_interval(timeout_);
  for (;;) {
    fd_ = net::try_connect(host, port, deadline, why);
    if (fd_) return;
    auto now = Clock::now();
    if (now >= deadline) break;
    if (now >= next_report) {
      next_report = now + startup_report_interval(timeout_);
      log::warn("still trying to reach the bootstrap store at ", address_, " (",
                std::chrono::duration_cast<std::chrono::seconds>(now - start).count(), " s so far; last attempt: ",
                why, "): is the rank that serves it (rank 0, or chorusrun) running, at this address?");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(delay, deadline - now));
    delay = std::min(delay * 2, kMaxRetryDelay);
  }
  fail(Status::timeout, "could not connect to the bootstrap store at ", address_, " within ", timeout_.count(),
       " ms (last attempt: ", why, ")");
}

uint32_t StoreClient::Impl::next_id() {
  if (++last_id_ == 0) ++last_id_;  // id 0 marks the server's connection-level errors
  return last_id_;
}

void StoreClient::Impl::set(const std::string& key, const Bytes& value) {
  call(Frame::set(next_id(), key, value), Type::ok, deadline(), concat("setting ", quoted_key(key)));
}

Bytes StoreClient::Impl::get(const std::string& key, Clock::time_point deadline) {
  if (!failure_ || asking_failure_) return get_until(key, deadline);
  // A slice that times out leaves its request abandoned: the late reply is
  // dropped (receive_reply).
  return get_checking_failures([&](Clock::time_point until) { return get_until(key, until); }, key, deadline, failure_,
                               asking_failure_);
}

Bytes StoreClient::Impl::get_until(const std::string& key, Clock::time_point deadline) {
  return call(Frame::get(next_id(), key, true), Type::value, deadline, concat("waiting for ", quoted_key(key))).blob;
}

int64_t StoreClient::Impl::add(const std::string& key, int64_t delta) {
  return call(Frame::add(next_id(), key, delta), Type::counter, deadline(),
              concat("adding ", delta, " to ", quoted_key(key)))
      .number;
}

bool StoreClient::Impl::check(const std::string& key) {
  return call(Frame::check(next_id(), key), Type::exists, deadline(), concat("checking ", quoted_key(key))).exists;
}

Frame StoreClient::Impl::call(Frame request, Type expected, Clock::time_point deadline, const std::string& what) {
  if (!broken_.empty()) {
    fail(Status::bootstrap, "the connection to the bootstrap store at ", address_, " is unusable (", broken_,
         "); cannot continue ", what);
  }
  send_all(frame::encode(request), deadline, what);
  Frame reply = receive_reply(request.request_id, deadline, what);
  if (reply.type != expected) {
    broken(concat("the store answered ", what, " with ", frame::type_name(reply.type), " instead of ",
                  frame::type_name(expected)));
  }
  return reply;
}

void StoreClient::Impl::send_all(const Bytes& bytes, Clock::time_point deadline, const std::string& what) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd_.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      broken(concat("sending to the store failed while ", what, ": ", errno_string(errno)));
    }
    pollfd entry{fd_.get(), POLLOUT, 0};
    int ready = ::poll(&entry, 1, net::poll_timeout_ms(deadline));
    if (ready < 0 && errno != EINTR) broken(concat("poll() failed while ", what, ": ", errno_string(errno)));
    if (ready == 0) {
      // Part of a frame may be on the wire: the stream is out of step for good.
      if (sent > 0) broken_ = concat("a request was cut off by a timeout while ", what);
      timed_out(what);
    }
  }
}

Frame StoreClient::Impl::receive_reply(uint32_t id, Clock::time_point deadline, const std::string& what) {
  for (;;) {
    frame::Decoded decoded = decoder_.next();
    if (decoded.status == frame::DecodeStatus::error) {
      broken(concat("malformed reply while ", what, ": ", decoded.error));
    }
    if (decoded.status == frame::DecodeStatus::need_more) {
      try {
        receive_more(deadline, what);
      } catch (const Error& e) {
        if (e.status() == Status::timeout) abandoned_.insert(id);
        throw;
      }
      continue;
    }
    Frame& reply = decoded.frame;
    answered_ = true;
    if (reply.type == Type::error && reply.request_id == 0) {
      broken_ = reply.message;
      fail(Status::bootstrap, "the bootstrap store at ", address_, " closed the connection while ", what, ": ",
           reply.message);
    }
    if (reply.request_id == id) {
      if (reply.type == Type::error) {
        fail(Status::bootstrap, "the bootstrap store at ", address_, " refused ", what, ": ", reply.message);
      }
      return std::move(reply);
    }
    if (abandoned_.erase(reply.request_id) == 0) {
      broken(concat("reply with unknown request id ", reply.request_id, " while ", what));
    }
  }
}

void StoreClient::Impl::receive_more(Clock::time_point deadline, const std::string& what) {
  uint8_t buffer[frame::kReadChunk];
  for (;;) {
    ssize_t n = ::recv(fd_.get(), buffer, sizeof buffer, 0);
    if (n > 0) {
      decoder_.feed({buffer, static_cast<size_t>(n)});
      return;
    }
    if (n == 0) broken(concat("the store closed the connection while ", what));
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      broken(concat("receiving from the store failed while ", what, ": ", errno_string(errno)));
    }
    pollfd entry{fd_.get(), POLLIN, 0};
    int ready = ::poll(&entry, 1, net::poll_timeout_ms(deadline));
    if (ready < 0 && errno != EINTR) broken(concat("poll() failed while ", what, ": ", errno_string(errno)));
    if (ready == 0) timed_out(what);
  }
}

void StoreClient::Impl::timed_out(const std::string& what) {
  fail(Status::timeout, "timed out after ", timeout_.count(), " ms ", what, " in the bootstrap store at ", address_);
}

void StoreClient::Impl::broken(const std::string& why) {
  broken_ = why;
  if (served_by_ >= 0) {
    // The store went with the process that served it: that rank is gone.
    throw Error(Status::peer_failed,
                concat("rank ", served_by_, ", which served the bootstrap store at ", address_,
                       ", is gone (it ended or was killed): ", why),
                served_by_);
  }
  fail(Status::bootstrap, "bootstrap store at ", address_, ": ", why);
}

// --- StoreClient ---------------------------------------------------------------

StoreClient::StoreClient(const std::string& host, uint16_t port, const std::string& secret,
                         std::chrono::milliseconds timeout, std::optional<std::chrono::milliseconds> connect_within)
    : impl_(std::make_unique<Impl>(host, port, secret, timeout, connect_within.value_or(timeout))) {}
StoreClient::~StoreClient() = default;

void StoreClient::set(const std::string& key, const Bytes& value) { impl_->set(key, value); }
Bytes StoreClient::get(const std::string& key) { return impl_->get(key); }
int64_t StoreClient::add(const std::string& key, int64_t delta) { return impl_->add(key, delta); }
bool StoreClient::check(const std::string& key) { return impl_->check(key); }
Bytes StoreClient::get_until(const std::string& key, Clock::time_point deadline) { return impl_->get(key, deadline); }
void StoreClient::set_failure_check(std::function<std::optional<Error>()> failure) {
  impl_->set_failure_check(std::move(failure));
}

void StoreClient::set_served_by(int rank) { impl_->set_served_by(rank); }

Bytes get_checking_failures(const std::function<Bytes(Clock::time_point)>& get_until, const std::string& key,
                            Clock::time_point deadline, const std::function<std::optional<Error>()>& failure,
                            bool& asking) {
  for (;;) {
    const auto slice_end = std::min(deadline, Clock::now() + kFailureCheckInterval);
    try {
      return get_until(slice_end);
    } catch (const Error& e) {
      if (e.status() != Status::timeout || slice_end >= deadline) throw;
    }
    std::optional<Error> failed;
    {
      struct Asking {
        bool& flag;
        ~Asking() { flag = false; }
      } guard{asking = true};
      failed = failure();
    }
    if (failed) {
      throw Error(failed->status(), concat("while waiting for ", quoted_key(key), ": ", failed->what()), failed->peer());
    }
  }
}

void StoreClient::wait(const std::vector<std::string>& keys) {
  // One deadline for the whole set: waiting for N keys is one call, not N.
  const auto until = impl_->deadline();
  for (const auto& key : keys) impl_->get(key, until);
}

}  // namespace chorus::bootstrap
