// Registration cache: user memory is cached only on transports that do not
// pin pages; memory chorus owns is cached everywhere until it is forgotten.
#include "p2p/reg_cache.hpp"

#include <gtest/gtest.h>

#include <vector>

using namespace chorus;

namespace {

// Counts registrations; nothing else of the contract is used by the cache.
class CountingTransport final : public transport::Transport {
 public:
  explicit CountingTransport(bool pins) : pins_(pins) {}
  int registrations = 0;
  int live = 0;

  std::string name() const override { return "counting"; }
  transport::Blob address() override { return {}; }
  void connect(const std::vector<transport::Blob>&) override {}
  size_t max_eager_bytes() const override { return 4096; }
  void post_eager(int, const void*, size_t, const void*, size_t) override {}
  bool registration_pins_pages() const override { return pins_; }
  std::unique_ptr<transport::MemoryRegion> register_memory(void* base, size_t length) override {
    ++registrations;
    return std::make_unique<Region>(*this, base, length);
  }
  void post_read(int, transport::RemoteBuffer, transport::MemoryRegion&, size_t, size_t, uint64_t) override {}
  int poll(transport::Sink&) override { return 0; }
  int wait_fd() override { return -1; }
  bool arm() override { return false; }

 private:
  struct Region final : transport::MemoryRegion {
    Region(CountingTransport& owner, void* base, size_t length)
        : MemoryRegion(base, length, reinterpret_cast<uintptr_t>(base), 1), owner_(owner) {
      ++owner_.live;
    }
    ~Region() override { --owner_.live; }
    CountingTransport& owner_;
  };
  bool pins_;
};

}  // namespace

TEST(RegCache, CachesUserMemoryWhenPagesAreNotPinned) {
  CountingTransport transport(false);
  p2p::RegCache cache(transport, 1 << 30);
  std::vector<char> buffer(1 << 20);
  cache.acquire(buffer.data(), buffer.size());
  cache.acquire(buffer.data() + 100, 1000);  // inside the first entry
  EXPECT_EQ(transport.registrations, 1);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_TRUE(cache.caches_user_memory());
}

TEST(RegCache, PinningTransportRegistersUserMemoryPerUse) {
  CountingTransport transport(true);
  p2p::RegCache cache(transport, 1 << 30);
  std::vector<char> buffer(1 << 20);
  {
    auto first = cache.acquire(buffer.data(), buffer.size());
    EXPECT_EQ(transport.live, 1);
  }
  EXPECT_EQ(transport.live, 0) << "an uncached registration ends with its operation";
  cache.acquire(buffer.data(), buffer.size());
  EXPECT_EQ(transport.registrations, 2) << "a freed and reused address must not find the old pages";
  EXPECT_FALSE(cache.caches_user_memory());
}

TEST(RegCache, PersistentMemoryIsCachedUntilForgotten) {
  CountingTransport transport(true);
  p2p::RegCache cache(transport, 1 << 30);
  std::vector<char> scratch(1 << 20);
  cache.add_persistent(scratch.data(), scratch.size());
  cache.acquire(scratch.data() + 4096, 8192);
  EXPECT_EQ(transport.registrations, 1);
  EXPECT_EQ(cache.hits(), 1u);
  cache.forget(scratch.data(), scratch.size());
  EXPECT_EQ(transport.live, 0);
  EXPECT_EQ(cache.registered_bytes(), 0u);
  cache.acquire(scratch.data() + 4096, 8192);
  EXPECT_EQ(transport.registrations, 2);
}

TEST(RegCache, ForgetDropsOnlyOverlappingEntries) {
  CountingTransport transport(false);
  p2p::RegCache cache(transport, 1 << 30);
  // Two ranges a page apart, so their page-rounded entries do not touch.
  std::vector<char> memory(1 << 20);
  char* a = memory.data();
  char* b = memory.data() + (1 << 19);
  cache.acquire(a, 1 << 16);
  cache.acquire(b, 1 << 16);
  cache.forget(a, 1 << 16);
  EXPECT_EQ(transport.live, 1);
  cache.acquire(b, 1 << 16);
  EXPECT_EQ(transport.registrations, 2);
}
