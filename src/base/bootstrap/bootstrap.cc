// Bootstrap: the store connection of one rank, plus all_gather and barrier
// built from store operations. Keys are namespaced by the job id, so jobs
// sharing a store (or a stale store) never read each other's values.
#include "bootstrap/departures.hpp"
#include "bootstrap/frame.hpp"
#include "bootstrap/pmix_client.hpp"
#include "bootstrap/port_file.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "common/config.hpp"
#include "common/log.hpp"

#include <algorithm>
#include <thread>

namespace chorus::bootstrap {

namespace {

// Rank 0 publishes the port file only when nobody was told an address.
bool publishes_port_file(const JobInfo& job) {
  return job.bootstrap != "pmix" && job.rank0_serves && job.rank == 0 && job.store_host.empty() && job.size > 1;
}

// A wildcard bind address is not something to connect to.
std::string connectable_host(const std::string& bind_host) {
  if (bind_host == "0.0.0.0") return "127.0.0.1";
  if (bind_host == "::") return "::1";
  return bind_host;
}

void validate_ranks(const JobInfo& job) {
  if (job.size < 1 || job.rank < 0 || job.rank >= job.size) {
    fail(Status::invalid_argument, "invalid job: rank ", job.rank, " of size ", job.size);
  }
}

void validate(const JobInfo& job) {
  validate_ranks(job);
  if (!job.rank0_serves && job.store_host.empty()) {
    fail(Status::config, "rank ", job.rank, " has no store address and the launcher (", job.launcher,
         ") does not have rank 0 serve one");
  }
}

// Rethrows a timeout with what the collective was waiting for.
template <class Body>
auto with_context(const std::string& context, int peer, Body&& body) {
  try {
    return body();
  } catch (const Error& e) {
    if (e.status() != Status::timeout) throw;
    throw Error(Status::timeout, concat(context, ": ", e.what()), peer);
  }
}

// Every all_gather value starts with its rank's job size, and rank 0's packed
// value with rank 0's (0 there: the text of a size mismatch follows), so ranks
// started with different sizes all fail in the first exchange, naming both.
constexpr uint32_t kSizeMismatch = 0;

Bytes with_u32(uint32_t value, std::span<const uint8_t> rest) {
  Bytes out;
  frame::put_u32(out, value);
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

// Splits a value made by with_u32; throws naming `key` if it is too short.
uint32_t take_u32(Bytes& value, const std::string& key) {
  if (value.size() < frame::kLengthBytes) fail(Status::bootstrap, "all_gather value ", key, " is truncated");
  const uint32_t number = frame::get_u32(value.data());
  value.erase(value.begin(), value.begin() + frame::kLengthBytes);
  return number;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) text += concat(i == 0 ? "" : ", ", ranks[i]);
  if (ranks.size() > 16) text += concat(" and ", ranks.size() - 16, " more");
  return text;
}

// Values up to this size are packed by rank 0 into one key for the others
// (3N store operations in all instead of N*N); larger gathers read every key.
constexpr size_t kMaxPacked = 512 * 1024;

}  // namespace

std::chrono::milliseconds startup_report_interval(std::chrono::milliseconds timeout) {
  return std::clamp<std::chrono::milliseconds>(timeout / 10, std::chrono::seconds(1), std::chrono::seconds(5));
}

namespace packed {

Bytes pack(const std::vector<Bytes>& blobs) {
  Bytes packed;
  for (const auto& blob : blobs) {
    frame::put_u32(packed, static_cast<uint32_t>(blob.size()));
    packed.insert(packed.end(), blob.begin(), blob.end());
  }
  return packed;
}

std::vector<Bytes> unpack(std::span<const uint8_t> packed, int size, const std::string& key) {
  std::vector<Bytes> blobs;
  size_t offset = 0;
  for (int r = 0; r < size; ++r) {
    if (packed.size() - offset < frame::kLengthBytes) {
      fail(Status::bootstrap, "packed all_gather value ", key, " is truncated");
    }
    const uint32_t length = frame::get_u32(packed.data() + offset);
    offset += frame::kLengthBytes;
    if (packed.size() - offset < length) fail(Status::bootstrap, "packed all_gather value ", key, " is truncated");
    blobs.emplace_back(packed.begin() + static_cast<std::ptrdiff_t>(offset),
                       packed.begin() + static_cast<std::ptrdiff_t>(offset + length));
    offset += length;
  }
  if (offset != packed.size()) fail(Status::bootstrap, "packed all_gather value ", key, " has trailing bytes");
  return blobs;
}

}  // namespace packed

Bootstrap::Bootstrap(const JobInfo& job, std::chrono::milliseconds timeout) : job_(job), timeout_(timeout) {
  validate(job_);
  std::string host = job_.store_host;
  uint16_t port = job_.store_port;
  if (job_.rank0_serves && job_.rank == 0) {
    std::string bind_host = job_.store_host.empty() ? "127.0.0.1" : job_.store_host;
    try {
      server_ = std::make_unique<StoreServer>(bind_host, job_.store_port, job_.secret);
    } catch (const Error& e) {
      throw Error(e.status(), concat("rank 0 cannot serve the bootstrap store (", job_.launcher, " job ", job_.job_id,
                                     "): ", e.what(),
                                     job_.store_port != 0 ? "; if the port is taken (torchrun's own store uses "
                                                            "MASTER_PORT), set CHORUS_STORE_ADDR to a free host:port"
                                                          : ""));
    }
    host = connectable_host(bind_host);
    port = server_->port();
    if (publishes_port_file(job_)) port_file::publish(port_file::path_for(job_.job_id), port);
  } else if (host.empty()) {
    host = "127.0.0.1";  // the port file is only for ranks on rank 0's host
    port = port_file::wait_for(port_file::path_for(job_.job_id), timeout);
  }
  connect_store(host, port);
}

void Bootstrap::connect_store(const std::string& host, uint16_t port) {
  auto client = std::make_unique<StoreClient>(host, port, job_.secret, timeout_);
  if (job_.rank0_serves && job_.rank != 0) client->set_served_by(0);
  client_ = std::move(client);
  departures_ = std::make_unique<Departures>(*client_, job_.job_id);
  client_->set(Departures::joined_key(job_.job_id, job_.rank), Bytes{1});
  client_->set_failure_check([this] { return peer_failure(); });
  log::debug("rank ", job_.rank, " connected to the bootstrap store at ", net::format_address(host, port),
             server_ ? " (served by this process)" : "");
}

Bootstrap::Bootstrap(const JobInfo& job, std::chrono::milliseconds timeout, std::shared_ptr<PmixClient> pmix)
    : job_(job), timeout_(timeout), pmix_(std::move(pmix)) {
  validate_ranks(job_);
  if (!pmix_) fail(Status::internal, "the PMIx bootstrap was asked for without a PMIx client");
  open_pmix_store();
  log::info("rank ", job_.rank, "/", job_.size, ": bootstrap pmix (", pmix_description(), ", namespace ",
            pmix_->nspace(), ", node ", pmix_->node_id(), ", local rank ", job_.local_rank, " of ", job_.local_size,
            ")");
}

Bootstrap::Bootstrap(const JobInfo& job, std::chrono::milliseconds timeout, std::unique_ptr<StoreAccess> store)
    : job_(job), timeout_(timeout), client_(std::move(store)) {
  validate_ranks(job_);
  departures_ = std::make_unique<Departures>(*client_, job_.job_id);
  client_->set_failure_check([this] { return peer_failure(); });
}

Bootstrap::~Bootstrap() {
  client_.reset();
  if (server_) {
    // What "no connection to rank 0" means, counted (bench/bootstrap-scale reads it).
    log::info("rank 0: the store it serves accepted ", server_->stats().connections_accepted, " connections",
              pmix_ ? " (under PMIx a rank connects only when it needs the store)" : "");
    // This rank serves the store (mpirun, srun, torchrun): after an error,
    // the other ranks still need it to read who failed and why (departures)
    // and fail naming that rank instead of a closed store. Wait until they
    // have gone (normally at once: finalize waited for them), at most 2 s.
    const auto give_up = std::chrono::steady_clock::now() + std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(2));
    while (server_->clients() > 0 && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (publishes_port_file(job_)) port_file::remove(port_file::path_for(job_.job_id));
}

StoreAccess& Bootstrap::store() { return *client_; }
bool Bootstrap::store_open() const { return lazy_ == nullptr || lazy_->connected(); }
Departures& Bootstrap::departures() { return *departures_; }

std::optional<Error> Bootstrap::peer_failure(bool may_open_store) {
  if (std::optional<Error> failure = launcher_failure()) return failure;
  if (pmix_) {
    if (std::optional<Error> failure = pmix_->terminated()) return failure;
  }
  if (!departures_ || !store_answers_) return std::nullopt;
  if (!may_open_store && !store_open()) return std::nullopt;
  try {
    departures_->refresh();
  } catch (const Error&) {
    store_answers_ = false;  // rank 0 may have served the store and gone
    return std::nullopt;
  }
  const Departure* failed = departures_->first_failed();
  if (failed == nullptr) return std::nullopt;
  return Error(Status::peer_failed, failed->describe(), failed->rank);
}

// After a size mismatch, rank 0 (which may serve the store) leaves only once
// the other ranks it knows of have read the verdict, or after a second: they
// fail naming the sizes, not a closed store.
void Bootstrap::linger_until_read(const std::string& counter, int readers) {
  const auto give_up = std::chrono::steady_clock::now() + std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(1));
  while (client_->add(counter, 0) < readers && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// get() that says every few seconds what is missing (wait_reporting's
// caller knows: which ranks, or that rank 0 has not gathered yet).
Bytes Bootstrap::wait_reporting(const std::string& key, const std::function<std::string()>& what_is_missing,
                                const std::string& hint) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + timeout_;
  const auto interval = startup_report_interval(timeout_);
  auto next_report = start + interval;
  for (;;) {
    // Slices of a second: between them, ask whether a rank failed (as get() does).
    const auto slice_end = std::min(deadline, Clock::now() + std::chrono::seconds(1));
    try {
      return client_->get_until(key, slice_end);
    } catch (const Error& e) {
      if (e.status() != Status::timeout || slice_end >= deadline) throw;
    }
    if (std::optional<Error> failure = peer_failure()) {
      throw Error(failure->status(), concat("while waiting for key \"", key, "\": ", failure->what()), failure->peer());
    }
    const auto now = Clock::now();
    if (now < next_report) continue;
    next_report = now + interval;
    log::warn(what_is_missing(), " (", std::chrono::duration_cast<std::chrono::seconds>(now - start).count(),
              " s so far; CHORUS_TIMEOUT is ", static_cast<double>(timeout_.count()) / 1000, " s)", hint);
  }
}

std::optional<Error> Bootstrap::launcher_failure() {
  if (job_.launcher != "chorusrun" || !store_answers_ || !client_) return std::nullopt;
  try {
    if (!client_->check("chorus/failed")) return std::nullopt;
    const Bytes report = client_->get("chorus/failed");
    int peer = -1;
    // chorusrun sets the rank first: whoever sees chorus/failed finds it.
    if (client_->check("chorus/failed_rank")) {
      const Bytes text = client_->get("chorus/failed_rank");
      peer = static_cast<int>(config::parse_int(std::string(text.begin(), text.end()), 0, job_.size - 1).value_or(-1));
    }
    return Error(Status::peer_failed, concat("chorusrun reports: ", std::string(report.begin(), report.end())), peer);
  } catch (const Error&) {
    store_answers_ = false;  // the store may be gone with the failed rank (rank 0 served it)
    return std::nullopt;
  }
}

std::vector<Bytes> Bootstrap::all_gather(const std::string& prefix, const Bytes& blob) {
  if (pmix_) return pmix_all_gather(prefix, blob);  // bootstrap_pmix.cc
  const std::string base = concat(job_.job_id, "/", prefix);
  // Every rank counts its own calls with this prefix, so a repeated gather
  // uses fresh keys instead of returning the previous round's values.
  const int64_t round = client_->add(concat(base, "/round/", job_.rank), 1) - 1;
  const std::string keys = round == 0 ? base : concat(base, "#", round);
  auto key_of = [&](int r) { return concat(keys, "/", r); };
  const std::string packed_key = keys + "/all";
  const auto size = static_cast<uint32_t>(job_.size);
  const bool first = !joined_;
  joined_ = true;
  const std::string waiting_for = first ? "to join the job" : concat("to reach all_gather \"", prefix, "\"");
  // Without an address, only ranks on rank 0's host can find the store.
  const std::string address_hint =
      job_.rank0_serves && job_.store_host.empty() && job_.size > 1
          ? concat("; ranks on other hosts than rank 0 cannot find its store: set MASTER_ADDR and MASTER_PORT (or "
                   "CHORUS_STORE_ADDR=host:port) in every rank")
          : std::string();

  client_->set(key_of(job_.rank), with_u32(size, blob));
  std::vector<Bytes> blobs;
  if (job_.rank == 0) {
    size_t total = 0;
    for (int r = 0; r < job_.size; ++r) {
      auto missing = [&] {
        std::vector<int> absent;
        for (int other = r; other < job_.size; ++other) {
          if (!client_->check(key_of(other))) absent.push_back(other);
        }
        return concat("still waiting for rank", absent.size() == 1 ? " " : "s ", rank_list(absent), " of ", job_.size,
                      " ", waiting_for, " (job ", job_.job_id, ")");
      };
      Bytes value = with_context(concat("all_gather \"", prefix, "\": rank ", r, "'s value never arrived"), r,
                                 [&] { return wait_reporting(key_of(r), missing, address_hint); });
      const uint32_t their_size = take_u32(value, key_of(r));
      if (their_size != size) {
        const std::string mismatch =
            concat("the ranks disagree on the job's size: rank 0 has ", job_.size_variable, "=", job_.size, ", rank ", r,
                   " has ", job_.size_variable, "=", their_size, "; every rank must be started with the same ",
                   job_.size_variable);
        client_->set(packed_key, with_u32(kSizeMismatch, Bytes(mismatch.begin(), mismatch.end())));
        // Every other rank may be waiting for the gathered value, not only
        // ranks 1..r whose keys rank 0 has read: ranks past r that already
        // joined would otherwise find the store gone (it lives in this
        // process under torchrun). Bounded to 1 s for ranks that never came.
        linger_until_read(keys + "/mismatch-read", job_.size - 1);
        throw Error(Status::config, mismatch, r);
      }
      blobs.push_back(std::move(value));
      total += frame::kLengthBytes + blobs.back().size();
    }
    // An empty packed value tells the others to read every key themselves.
    client_->set(packed_key, with_u32(size, total <= kMaxPacked ? packed::pack(blobs) : Bytes{}));
    return blobs;
  }
  auto rank0_missing = [&] {
    return concat("still waiting for rank 0 to gather every rank's value", first ? " (the ranks are joining the job)" : "",
                  "; rank 0 says which ranks are missing");
  };
  Bytes gathered = with_context(concat("all_gather \"", prefix, "\": rank 0 never published the gathered values"), 0,
                                [&] { return wait_reporting(packed_key, rank0_missing, ""); });
  const uint32_t rank0_size = take_u32(gathered, packed_key);
  if (rank0_size != size) client_->add(keys + "/mismatch-read", 1);  // rank 0 may take the store down now
  if (rank0_size == kSizeMismatch) throw Error(Status::config, std::string(gathered.begin(), gathered.end()), 0);
  if (rank0_size != size) {
    throw Error(Status::config,
                concat("the ranks disagree on the job's size: rank 0 has ", job_.size_variable, "=", rank0_size,
                       ", rank ", job_.rank, " (this rank) has ", job_.size_variable, "=", job_.size,
                       "; every rank must be started with the same ", job_.size_variable),
                0);
  }
  if (!gathered.empty()) return packed::unpack(gathered, job_.size, packed_key);
  for (int r = 0; r < job_.size; ++r) {
    Bytes value = client_->get(key_of(r));
    take_u32(value, key_of(r));
    blobs.push_back(std::move(value));
  }
  return blobs;
}

bool Bootstrap::any_rank(const std::string& name, bool mine, const std::function<void()>& progress) {
  if (pmix_) return pmix_any_rank(name, mine, progress);  // bootstrap_pmix.cc
  const std::string counter = concat(job_.job_id, "/", name, "/any");
  if (mine) client_->add(counter, 1);  // only a rank that has something writes
  barrier(name, progress);
  return client_->add(counter, 0) > 0;
}

void Bootstrap::barrier(const std::string& name, const std::function<void()>& progress) {
  if (pmix_) {
    wait_fence(pmix_->start_fence(false), concat("barrier \"", name, "\""), progress);
    return;
  }
  // Arrival n belongs to round (n-1)/size; the last arriver of a round opens it.
  const std::string base = concat(job_.job_id, "/barrier/", name);
  const int64_t arrival = client_->add(base + "/arrived", 1);
  const int64_t round = (arrival - 1) / job_.size;
  const std::string open_key = concat(base, "/open/", round);
  if (arrival % job_.size == 0) client_->set(open_key, Bytes{1});
  auto timed_out = [&](const std::string& why) {
    const int64_t arrived = client_->add(base + "/arrived", 0) - round * job_.size;
    return Error(Status::timeout, concat("barrier \"", name, "\": only ", arrived, " of ", job_.size,
                                         " ranks arrived: ", why));
  };
  if (!progress) {
    try {
      client_->get(open_key);
    } catch (const Error& e) {
      if (e.status() != Status::timeout) throw;
      throw timed_out(e.what());
    }
    return;
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout_;
  auto next_failure_check = Clock::now() + std::chrono::seconds(1);
  auto pause = std::chrono::microseconds(100);  // grows to 5 ms: early arrivers do not hammer the store
  while (!client_->check(open_key)) {
    progress();
    const auto now = Clock::now();
    if (now >= deadline) throw timed_out(concat("no answer within ", timeout_.count(), " ms"));
    if (now >= next_failure_check) {
      next_failure_check = now + std::chrono::seconds(1);
      if (std::optional<Error> failure = peer_failure()) {
        throw Error(failure->status(), concat("barrier \"", name, "\": ", failure->what()), failure->peer());
      }
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(5));
  }
}

}  // namespace chorus::bootstrap
