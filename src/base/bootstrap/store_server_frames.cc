// The store server's frame handling: authentication (HELLO and the secret),
// the requests (set, get, wait, add, check) and their replies, refusals and
// errors. Connections and the poll loop: store_server.cc.
#include "bootstrap/store_server_impl.hpp"

#include "bootstrap/secret.hpp"
#include "common/log.hpp"

#include <charconv>

namespace chorus::bootstrap {

namespace {

std::optional<int64_t> parse_counter(const Bytes& value) {
  int64_t number = 0;
  const char* begin = reinterpret_cast<const char*>(value.data());
  auto [end, ec] = std::from_chars(begin, begin + value.size(), number);
  if (ec != std::errc() || end != begin + value.size() || value.empty()) return std::nullopt;
  return number;
}

Bytes counter_bytes(int64_t number) {
  std::string text = std::to_string(number);
  return Bytes(text.begin(), text.end());
}

}  // namespace

bool StoreServer::Impl::process_frames(Connection& c) {
  bool completed = false;
  while (!c.closing && !c.dead) {
    frame::Decoded decoded = c.decoder.next();
    if (decoded.status == frame::DecodeStatus::need_more) return completed;
    if (decoded.status == frame::DecodeStatus::error) {
      reject(c, decoded.error);
      return completed;
    }
    completed = true;
    handle(c, decoded.frame);
  }
  return completed;
}

// What a connection that has not presented the secret may not do: announce
// anything but a HELLO, or a HELLO larger than a secret needs. Checked as
// soon as the header is in, before its payload is held.
std::string StoreServer::Impl::check_unauthenticated(const Connection& c) const {
  const std::optional<frame::Header> header = c.decoder.pending_header();
  if (!header || !frame::check_header(*header).empty()) return {};  // the decoder names a malformed header
  if (header->type != static_cast<uint8_t>(Type::hello)) {
    return concat("expected HELLO with the job secret as the first frame, got ", frame::type_name(header->type));
  }
  if (header->payload_bytes > kMaxHelloPayload) {
    return concat("HELLO payload of ", header->payload_bytes, " bytes exceeds the ", kMaxHelloPayload,
                  "-byte limit for a connection that has not presented the job secret");
  }
  return {};
}

void StoreServer::Impl::handle(Connection& c, const Frame& request) {
  if (!c.authenticated) return authenticate(c, request);
  if (request.type == Type::hello) return reject(c, "duplicate HELLO on an authenticated connection");
  if (!frame::is_request(request.type)) {
    return reject(c, concat("unexpected ", frame::type_name(request.type), " frame: clients send requests only"));
  }
  handle_request(c, request);
}

void StoreServer::Impl::authenticate(Connection& c, const Frame& request) {
  if (request.type != Type::hello) {
    return refuse(c, concat("expected HELLO with the job secret as the first frame, got ",
                            frame::type_name(request.type)));
  }
  if (!secrets_match(request.blob, secret_)) return refuse(c, "wrong job secret");
  c.authenticated = true;
  clients_.fetch_add(1);
  --unauthenticated_;
  reply(c, Frame::ok(request.request_id));
}

void StoreServer::Impl::handle_request(Connection& c, const Frame& request) {
  switch (request.type) {
    case Type::set: {
      {
        std::lock_guard<std::mutex> lock(store_mutex_);
        store_[request.key] = request.blob;
      }
      reply(c, Frame::ok(request.request_id));
      wake_waiters(request.key);
      return;
    }
    case Type::get: return handle_get(c, request);
    case Type::add: return handle_add(c, request);
    case Type::check: {
      bool exists = false;
      {
        std::lock_guard<std::mutex> lock(store_mutex_);
        exists = store_.contains(request.key);
      }
      return reply(c, Frame::exists_reply(request.request_id, exists));
    }
    default: return reject(c, concat("unexpected ", frame::type_name(request.type), " frame"));
  }
}

void StoreServer::Impl::handle_get(Connection& c, const Frame& request) {
  std::optional<Bytes> value;
  {
    std::lock_guard<std::mutex> lock(store_mutex_);
    if (auto found = store_.find(request.key); found != store_.end()) value = found->second;
  }
  if (value) return reply(c, Frame::value(request.request_id, *value));
  if (!request.wait) {
    // Not a protocol error: answer and keep the connection.
    return reply(c, Frame::error(request.request_id, concat("key \"", request.key, "\" is not set")));
  }
  // Parked until a SET or ADD of this key (wake_waiters), never polled.
  parked_[request.key].push_back(Waiter{c.id, request.request_id});
  c.parked_keys.push_back(request.key);
}

// The one ADD: a client's frame and the serving process (StoreServer::add)
// both come here. Empty `problem` on success; the caller wakes the waiters.
int64_t StoreServer::Impl::add_locked(const std::string& key, int64_t delta, std::string& problem) {
  auto stored = store_.find(key);
  std::optional<int64_t> current = stored == store_.end() ? std::optional<int64_t>(0) : parse_counter(stored->second);
  int64_t total = 0;
  if (!current) {
    problem = concat("ADD to key \"", key, "\" whose value (", stored->second.size(), " bytes) is not a decimal integer");
  } else if (__builtin_add_overflow(*current, delta, &total)) {
    problem = concat("ADD of ", delta, " to key \"", key, "\" (", *current, ") overflows a 64-bit integer");
  } else {
    store_[key] = counter_bytes(total);
  }
  return total;
}

void StoreServer::Impl::handle_add(Connection& c, const Frame& request) {
  std::string problem;
  int64_t total = 0;
  {
    std::lock_guard<std::mutex> lock(store_mutex_);
    total = add_locked(request.key, request.number, problem);
  }
  if (!problem.empty()) return reply(c, Frame::error(request.request_id, problem));
  reply(c, Frame::counter(request.request_id, total));
  wake_waiters(request.key);
}

void StoreServer::Impl::wake_waiters(const std::string& key) {
  auto parked = parked_.find(key);
  if (parked == parked_.end()) return;
  std::vector<Waiter> waiters = std::move(parked->second);
  parked_.erase(parked);
  Bytes value;
  {
    std::lock_guard<std::mutex> lock(store_mutex_);
    value = store_.at(key);
  }
  for (const Waiter& waiter : waiters) {
    Connection* c = find(waiter.connection);
    if (c == nullptr || c->closing) continue;
    if (auto it = std::find(c->parked_keys.begin(), c->parked_keys.end(), key); it != c->parked_keys.end()) {
      c->parked_keys.erase(it);
    }
    reply(*c, Frame::value(waiter.request_id, value));
  }
}

void StoreServer::Impl::reply(Connection& c, const Frame& response) {
  frame::encode_into(c.out, response);
  flush(c);
}

void StoreServer::Impl::refuse(Connection& c, const std::string& why) {
  ++refused_;
  log_refusal(concat("refused a connection from ", c.peer, ": ", why));
  close_with_error(c, why);
}

void StoreServer::Impl::reject(Connection& c, const std::string& why) {
  ++rejected_;
  log_refusal(concat("closed the connection from ", c.peer, ": ", why));
  close_with_error(c, why);
}

// A flood of bad connections (a scanner, a misconfigured job) must not flood
// the log: one line a second at most, with the count of the others.
void StoreServer::Impl::log_refusal(const std::string& what) {
  const auto now = Clock::now();
  if (refusal_log_.logged_at != Clock::time_point{} && now - refusal_log_.logged_at < kRefusalLogInterval) {
    ++refusal_log_.unlogged;
    refusal_log_.last_reason = what;
    return;
  }
  report_unlogged_refusals(now);
  log::warn("bootstrap store at ", address_, " ", what);
  refusal_log_.logged_at = now;
}

void StoreServer::Impl::report_unlogged_refusals(Clock::time_point now) {
  if (refusal_log_.unlogged == 0 || now - refusal_log_.logged_at < kRefusalLogInterval) return;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - refusal_log_.logged_at).count();
  log::warn("bootstrap store at ", address_, ": ", refusal_log_.unlogged, " more connection",
            refusal_log_.unlogged == 1 ? "" : "s", " refused or closed in the last ", ms,
            " ms (one line a second at most); the last: ", refusal_log_.last_reason);
  refusal_log_.unlogged = 0;
  refusal_log_.logged_at = now;
}

void StoreServer::Impl::close_with_error(Connection& c, const std::string& why) {
  // Clients match replies by request id; 0 marks an error about the connection itself.
  reply(c, Frame::error(0, why.substr(0, kMaxErrorMessage)));
  if (!c.closing && !c.authenticated) --unauthenticated_;
  c.closing = true;
  c.decoder = frame::Decoder();  // what it held is never read
  c.close_by = Clock::now() + close_grace_;
  if (!c.dead && c.unsent() == 0) flush(c);  // nothing left to send: half-close now
}

}  // namespace chorus::bootstrap
