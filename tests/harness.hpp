// Runs `body(engine, rank)` on `size` threads, each with its own P2P engine
// over one in-process fabric, and rethrows the first failure. For testing the
// engine and algorithms across many rank counts.
#pragma once

#include "p2p/engine.hpp"
#include "transports/inproc/inproc.hpp"

#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace chorus::testing {

// Short timeout so a rank that fails cannot leave the others waiting long.
inline config::Settings test_settings() {
  config::Settings settings;
  settings.timeout = std::chrono::seconds(30);
  settings.spin = std::chrono::microseconds(0);  // threads share 2 cores: yield early
  return settings;
}

inline void run_ranks(int size, const std::function<void(p2p::Engine&, int rank)>& body,
                      config::Settings settings = test_settings()) {
  transport::InprocFabric fabric(size);
  std::vector<std::unique_ptr<transport::Transport>> transports;
  for (int r = 0; r < size; ++r) transports.push_back(fabric.make_transport(r));
  std::vector<transport::Blob> addresses;
  for (auto& t : transports) addresses.push_back(t->address());
  for (auto& t : transports) t->connect(addresses);

  std::mutex mutex;
  std::exception_ptr first_failure;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        p2p::Engine engine(*transports[static_cast<size_t>(r)], r, size, size, settings);
        body(engine, r);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first_failure) first_failure = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first_failure) std::rethrow_exception(first_failure);
}

}  // namespace chorus::testing
