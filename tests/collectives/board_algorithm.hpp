// The board algorithm of a collective (collectives/board.cc), for the tests
// that run it directly: tests/collectives/test_board.cc (blocking) and
// tests/nonblocking/test_board_nonblocking.cc (on fibers).
#pragma once

#include "collectives/collectives.hpp"

#include <stdexcept>

namespace chorus::testing {

inline const coll::Algorithm& board(Collective op) {
  const coll::Algorithm* algorithm = coll::find(op, "board");
  if (algorithm == nullptr) throw std::runtime_error("no board algorithm");
  return *algorithm;
}

}  // namespace chorus::testing
