// RecyclingAllocator (src/base/common/recycling_allocator.hpp): a freed
// object comes back to the next allocation on the same thread, objects
// freed on another thread reach this one through the shared pool, a
// thread's list stays within its bound, and an exiting thread gives its
// list back. Each test uses a type of its own, so their pools are apart.
#include "common/recycling_allocator.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <thread>
#include <vector>

namespace {

template <int N>
struct Object {
  long words[6]{};
};

template <class T>
using Alloc = chorus::RecyclingAllocator<T>;

// An AddressSanitizer build recycles nothing (a use after free must stay
// visible): a freed object goes back to the heap, and no list keeps it.
template <class T>
void expect_nothing_kept() {
  T* object = Alloc<T>().allocate(1);
  Alloc<T>().deallocate(object, 1);
  EXPECT_EQ(Alloc<T>::kept_by_this_thread(), 0u);
  EXPECT_EQ(Alloc<T>::kept_in_shared_pool(), 0u);
}

}  // namespace

TEST(RecyclingAllocator, AFreedObjectIsTheNextOneOnTheSameThread) {
  using T = Object<1>;
  if (!chorus::kRecycleObjects) return expect_nothing_kept<T>();
  T* first = Alloc<T>().allocate(1);
  Alloc<T>().deallocate(first, 1);
  EXPECT_EQ(Alloc<T>::kept_by_this_thread(), 1u);
  T* second = Alloc<T>().allocate(1);
  EXPECT_EQ(second, first);
  EXPECT_EQ(Alloc<T>::kept_by_this_thread(), 0u);
  Alloc<T>().deallocate(second, 1);
}

TEST(RecyclingAllocator, AWindowOfObjectsIsReusedWholeAndTheListStaysBounded) {
  using T = Object<2>;
  if (!chorus::kRecycleObjects) return expect_nothing_kept<T>();
  const size_t many = Alloc<T>::kLocalKept * 3;
  std::vector<T*> objects;
  for (size_t i = 0; i < many; ++i) objects.push_back(Alloc<T>().allocate(1));
  const std::set<T*> made(objects.begin(), objects.end());
  ASSERT_EQ(made.size(), many);  // no object handed out twice
  for (T* object : objects) Alloc<T>().deallocate(object, 1);
  EXPECT_LE(Alloc<T>::kept_by_this_thread(), Alloc<T>::kLocalKept);
  EXPECT_EQ(Alloc<T>::kept_by_this_thread() + Alloc<T>::kept_in_shared_pool(), many);
  // The same objects come back, from this thread's list and then the pool.
  std::vector<T*> again;
  for (size_t i = 0; i < many; ++i) again.push_back(Alloc<T>().allocate(1));
  EXPECT_EQ(std::set<T*>(again.begin(), again.end()), made);
  EXPECT_EQ(Alloc<T>::kept_by_this_thread() + Alloc<T>::kept_in_shared_pool(), 0u);
  for (T* object : again) Alloc<T>().deallocate(object, 1);
}

// The progress thread frees what an application thread made: those objects
// must come back to the application thread, not pile up on the other.
TEST(RecyclingAllocator, ObjectsFreedByAnExitingThreadComeBackToThisOne) {
  using T = Object<3>;
  if (!chorus::kRecycleObjects) return expect_nothing_kept<T>();
  const size_t count = Alloc<T>::kLocalKept / 2;  // all of it stays in the other thread's list until it exits
  std::vector<T*> objects;
  for (size_t i = 0; i < count; ++i) objects.push_back(Alloc<T>().allocate(1));
  std::thread other([&] {
    for (T* object : objects) Alloc<T>().deallocate(object, 1);
    EXPECT_EQ(Alloc<T>::kept_by_this_thread(), count);
  });
  other.join();
  EXPECT_EQ(Alloc<T>::kept_in_shared_pool(), count);
  EXPECT_EQ(Alloc<T>::kept_by_this_thread(), 0u);
  std::set<T*> back;
  for (size_t i = 0; i < count; ++i) back.insert(Alloc<T>().allocate(1));
  EXPECT_EQ(back, std::set<T*>(objects.begin(), objects.end()));
  for (T* object : back) Alloc<T>().deallocate(object, 1);
}

// As std::allocate_shared uses it, from several threads at once: every
// object is intact until freed (a list shared by mistake would hand one
// object to two threads, and the values would clash).
TEST(RecyclingAllocator, ThreadsAllocatingAndFreeingAtOnceNeverShareAnObject) {
  using T = Object<4>;
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::vector<std::thread> threads;
  std::vector<int> clashes(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &clashes] {
      std::vector<std::shared_ptr<T>> held;
      for (int round = 0; round < kRounds; ++round) {
        auto object = std::allocate_shared<T>(Alloc<T>{});
        for (long& word : object->words) word = t * 1000003L + round;
        held.push_back(std::move(object));
        if (held.size() == 300 || round + 1 == kRounds) {
          for (size_t i = 0; i < held.size(); ++i) {
            for (long word : held[i]->words) {
              if (word != t * 1000003L + (round - static_cast<long>(held.size()) + 1 + static_cast<long>(i))) ++clashes[t];
            }
          }
          held.clear();
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(clashes[t], 0) << "thread " << t;
}
