// Runs the fuzz target over files and directories without libFuzzer, so the
// normal (gcc) build compiles the target and replays its seeds and saved
// regressions as an ordinary test. Usage: chorus-fuzz-replay PATH...
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
int replay(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  int inputs = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path path(argv[i]);
    if (std::filesystem::is_directory(path)) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(path)) {
      // Skips dot files (the generator's stamp).
      if (entry.is_regular_file() && entry.path().filename().string()[0] != '.') inputs += replay(entry.path());
      }
    } else {
      inputs += replay(path);
    }
  }
  std::printf("chorus-fuzz-replay: %d inputs, no crash\n", inputs);
  return inputs > 0 ? 0 : 1;
}
