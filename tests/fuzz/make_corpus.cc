// Writes the fuzzer's seed corpus: valid inputs for every parser of
// fuzz_bootstrap.cc, built with the real encoders so the seeds stay valid
// when the wire format changes. Usage: chorus-fuzz-corpus DIR
#include "bootstrap/frame.hpp"
#include "bootstrap/store.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace chorus::bootstrap;
using frame::Frame;

// Target numbers: the first byte of each input (see fuzz_bootstrap.cc).
enum Target : uint8_t { decode = 0, decoder = 1, unpack = 2, port_file = 3, host_port = 4, secret = 5 };

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

struct Writer {
  std::filesystem::path dir;
  int count = 0;
  void write(Target target, const Bytes& body) {
    auto path = dir / (std::to_string(target) + "-" + std::to_string(count++));
    std::ofstream out(path, std::ios::binary);
    out.put(static_cast<char>(target));
    out.write(reinterpret_cast<const char*>(body.data()), static_cast<std::streamsize>(body.size()));
    if (!out) throw std::runtime_error("cannot write " + path.string());
  }
};

std::vector<Frame> frames() {
  const Bytes blob = {0, 1, 2, 0xff, 'C', 'H', 'R', 'S'};
  return {Frame::hello(1, "0123456789abcdef0123456789abcdef"),
          Frame::set(2, "chorusrun-1-ab/chorus/transport/0", blob),
          Frame::set(3, "k", Bytes{}),
          Frame::get(4, "job/chorus/host/all", true),
          Frame::get(5, "job/x", false),
          Frame::add(6, "job/barrier/chorus/connected/arrived", 1),
          Frame::add(7, "c", std::numeric_limits<int64_t>::min()),
          Frame::check(8, "job/chorus/failed"),
          Frame::ok(9),
          Frame::value(10, blob),
          Frame::counter(11, -42),
          Frame::exists_reply(12, true),
          Frame::error(0, "wrong job secret")};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  try {
    Writer out{argv[1]};
    std::filesystem::create_directories(out.dir);
    Bytes stream;
    for (const Frame& f : frames()) {
      Bytes one = frame::encode(f);
      out.write(decode, one);
      stream.insert(stream.end(), one.begin(), one.end());
    }
    // A client's whole conversation, delivered in 1-, 3- and 7-byte pieces.
    for (uint8_t piece : {1, 3, 7}) {
      Bytes body = {0, piece};
      body.insert(body.end(), stream.begin(), stream.end());
      out.write(decoder, body);
    }
    for (int ranks : {1, 3}) {
      std::vector<Bytes> blobs;
      for (int r = 0; r < ranks; ++r) blobs.push_back(text("fi_addr-" + std::to_string(r)));
      Bytes body = {0, static_cast<uint8_t>(ranks - 1)};
      Bytes value = packed::pack(blobs);
      body.insert(body.end(), value.begin(), value.end());
      out.write(unpack, body);
    }
    out.write(port_file, text("40123\n"));
    for (const char* address : {"127.0.0.1:29500", "[::1]:1", "node-17.cluster:65535"}) out.write(host_port, text(address));
    out.write(secret, text("\x05hellohello"));
    std::printf("chorus-fuzz-corpus: %d seeds in %s\n", out.count, argv[1]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-fuzz-corpus: %s\n", e.what());
    return 1;
  }
}
