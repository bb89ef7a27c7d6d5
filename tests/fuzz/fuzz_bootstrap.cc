// libFuzzer target for every parser of the bootstrap that reads bytes from
// the network or from a file (docs/testing.md, "Fuzzing"). The first input
// byte picks the parser, the rest is its input:
//
//   0  frame::decode            a store frame, one shot (server and client)
//   1  frame::Decoder           the same bytes fed in pieces, as sockets deliver them
//   2  packed::unpack           rank 0's packed all_gather value read from the store
//   3  port_file::parse_port    the port file rank 0 writes under /tmp
//   4  net::parse_host_port     CHORUS_STORE_ADDR / MASTER_ADDR:MASTER_PORT
//   5  secrets_match            the HELLO secret check
//
// Besides "no crash, no sanitizer report", each parser's contract is checked
// and a violation traps: decoded frames re-encode to exactly their bytes
// (docs/bootstrap.md: the encoding is canonical), every proper prefix of a
// frame asks for more, the incremental decoder finds the same frames and fails
// at the same frame as the one-shot one whatever the chunking, and accepted
// values re-serialise to the same thing.
#include "bootstrap/frame.hpp"
#include "bootstrap/port_file.hpp"
#include "bootstrap/secret.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "common/error.hpp"

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace chorus;
using namespace chorus::bootstrap;
using Span = std::span<const uint8_t>;

// A broken contract is a finding: stop where it happened.
void require(bool condition) {
  if (!condition) __builtin_trap();
}

std::string_view as_text(Span bytes) { return {reinterpret_cast<const char*>(bytes.data()), bytes.size()}; }

void fuzz_decode(Span input) {
  frame::Decoded decoded = frame::decode(input);
  switch (decoded.status) {
    case frame::DecodeStatus::frame: {
      require(decoded.consumed >= frame::kHeaderBytes && decoded.consumed <= input.size());
      frame::Bytes again = frame::encode(decoded.frame);
      require(again.size() == decoded.consumed && std::memcmp(again.data(), input.data(), again.size()) == 0);
      // One byte short of a frame is never an error nor a frame.
      require(frame::decode(input.first(decoded.consumed - 1)).status == frame::DecodeStatus::need_more);
      break;
    }
    case frame::DecodeStatus::need_more: {
      require(frame::check_prefix(input).empty());
      if (input.size() >= frame::kHeaderBytes) {
        auto header = frame::read_header(input.first<frame::kHeaderBytes>());
        require(input.size() - frame::kHeaderBytes < header.payload_bytes);
      }
      break;
    }
    case frame::DecodeStatus::error: require(!decoded.error.empty()); break;
  }
}

// Feeds `input` in pieces whose sizes come from `sizes` (cycled) and checks
// the frames and the error against decoding the whole buffer at once.
void fuzz_decoder(Span input) {
  if (input.empty()) return;
  const size_t size_bytes = std::min<size_t>(input[0] % 8 + 1, input.size() - 1);
  Span sizes = input.subspan(1, size_bytes);
  Span stream = input.subspan(1 + size_bytes);

  std::vector<frame::Decoded> expected;
  for (Span rest = stream;;) {
    frame::Decoded d = frame::decode(rest);
    if (d.status != frame::DecodeStatus::frame) {
      expected.push_back(std::move(d));
      break;
    }
    rest = rest.subspan(d.consumed);
    expected.push_back(std::move(d));
  }

  frame::Decoder decoder;
  std::vector<frame::Decoded> got;
  size_t offset = 0;
  for (size_t piece = 0; offset < stream.size(); ++piece) {
    size_t n = sizes.empty() ? stream.size() : std::max<size_t>(1, sizes[piece % sizes.size()]);
    n = std::min(n, stream.size() - offset);
    decoder.feed(stream.subspan(offset, n));
    offset += n;
    (void)decoder.progress();
    for (;;) {
      frame::Decoded d = decoder.next();
      if (d.status == frame::DecodeStatus::need_more) break;
      bool stop = d.status == frame::DecodeStatus::error;
      got.push_back(std::move(d));
      if (stop) break;
    }
    if (!got.empty() && got.back().status == frame::DecodeStatus::error) break;
  }
  if (got.empty() || got.back().status != frame::DecodeStatus::error) {
    // Everything fed and no error: exactly the bytes after the last frame wait.
    size_t framed = 0;
    for (const auto& d : got) framed += d.consumed;
    require(decoder.mid_frame() == (framed < stream.size()));
    frame::Decoded last = decoder.next();
    require(last.status == frame::DecodeStatus::need_more);
    got.push_back(std::move(last));
  }
  require(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    require(got[i].status == expected[i].status);
    if (got[i].status == frame::DecodeStatus::frame) require(got[i].frame == expected[i].frame);
    // Not the same text: a prefix is refused as early as it can be, with
    // what is known then (e.g. 2 bytes of a bad magic), the whole buffer later.
    if (got[i].status == frame::DecodeStatus::error) require(!got[i].error.empty());
  }
}

void fuzz_unpack(Span input) {
  if (input.size() < 2) return;
  // Up to 1024 ranks: enough for every shape of truncation and trailing bytes.
  const int ranks = 1 + ((input[0] << 8 | input[1]) % 1024);
  Span value = input.subspan(2);
  try {
    std::vector<Bytes> blobs = packed::unpack(value, ranks, "fuzz/all");
    require(blobs.size() == static_cast<size_t>(ranks));
    Bytes again = packed::pack(blobs);
    require(again.size() == value.size() && std::equal(again.begin(), again.end(), value.begin()));
  } catch (const Error& e) {
    require(e.status() == Status::bootstrap);
  }
}

void fuzz_port_file(Span input) {
  try {
    uint16_t port = port_file::parse_port(as_text(input), "/tmp/fuzz-port-file");
    // Leading zeros are accepted ("080\n" is port 80), so compare values.
    require(port >= 1 && port_file::parse_port(concat(port, "\n"), "again") == port);
    require(!input.empty() && input.back() == '\n');
  } catch (const Error& e) {
    require(e.status() == Status::bootstrap);
  }
}

void fuzz_host_port(Span input) {
  auto parsed = net::parse_host_port(as_text(input));
  if (!parsed) return;
  require(!parsed->host.empty() && parsed->port >= 1);
  auto again = net::parse_host_port(net::format_address(parsed->host, parsed->port));
  require(again && again->host == parsed->host && again->port == parsed->port);
}

void fuzz_secret(Span input) {
  if (input.empty()) return;
  const size_t split = std::min<size_t>(input[0], input.size() - 1);
  Span presented = input.subspan(1, split);
  std::string_view expected = as_text(input.subspan(1 + split));
  require(secrets_match(presented, expected) == (as_text(presented) == expected));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Span input(data + 1, size - 1);
  switch (data[0] % 6) {
    case 0: fuzz_decode(input); break;
    case 1: fuzz_decoder(input); break;
    case 2: fuzz_unpack(input); break;
    case 3: fuzz_port_file(input); break;
    case 4: fuzz_host_port(input); break;
    case 5: fuzz_secret(input); break;
  }
  return 0;
}
