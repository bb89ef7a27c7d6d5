// The caller's store of the Communicator::init(rank, size, store) tests: a
// chorus::KeyValueStore over chorus' own TCP store client, as the PyTorch
// backend wraps c10d::Store.
#pragma once

#include "bootstrap/store.hpp"

#include <chorus/chorus.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::testing {

inline constexpr const char* kStoreInitSecret = "store-init-test";

class ClientStore final : public chorus::KeyValueStore {
 public:
  explicit ClientStore(uint16_t port)
      : client_("127.0.0.1", port, kStoreInitSecret, std::chrono::seconds(20)) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override { client_.set(key, value); }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return client_.get_until(key, std::chrono::steady_clock::now() + timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override { return client_.add(key, delta); }
  bool check(const std::string& key) override { return client_.check(key); }

 private:
  bootstrap::StoreClient client_;
};

}  // namespace chorus::testing
