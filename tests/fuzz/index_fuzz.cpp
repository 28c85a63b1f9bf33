// libFuzzer target: shard indexes (*.safetensors.index.json) and the checkpoint loader. The input
// is the index's text, placed in a model folder that holds a valid shard, a subfolder, a symlink
// leading out, a FIFO and a folder outside with another shard. Whatever the index says, the loader
// either refuses it with BadInput or loads only files inside the model folder; it never blocks on
// the FIFO (libFuzzer's -timeout catches a hang).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;

namespace {

void write_shard(const fs::path& p, const std::string& tensor) {
  std::string h =
      R"({")" + tensor + R"(": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  h.resize((h.size() + 7) / 8 * 8, ' ');
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(static_cast<uint64_t>(h.size()) >> (8 * i));
  std::ofstream(p, std::ios::binary) << s << h << std::string(8, '\x01');
}

struct Layout {
  fs::path root, model, index;
  Layout() {
    char tmpl[] = "/tmp/avdit-index-fuzz-XXXXXX";
    if (!::mkdtemp(tmpl)) std::abort();
    root = tmpl;
    model = root / "model";
    fs::create_directories(model / "sub");
    fs::create_directories(root / "outside");
    write_shard(model / "a.safetensors", "a");
    write_shard(model / "sub" / "b.safetensors", "b");
    write_shard(root / "outside" / "x.safetensors", "x");
    fs::create_symlink(root / "outside" / "x.safetensors", model / "out.safetensors");
    fs::create_symlink(root / "outside", model / "outdir");
    fs::create_symlink(model / "a.safetensors", model / "in.safetensors");
    ::mkfifo((model / "fifo.safetensors").c_str(), 0600);
    index = model / "model.safetensors.index.json";
  }
  ~Layout() { fs::remove_all(root); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Layout layout;
  {
    std::ofstream f(layout.index, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    const avdit::Checkpoint c = avdit::Checkpoint::open(layout.index);
    const fs::path root = fs::canonical(layout.model);
    for (const auto& f : c.files()) {
      const fs::path real = fs::canonical(f->path());
      if (real.string().rfind(root.string() + "/", 0) != 0)
        std::abort();  // a file outside was loaded
    }
    for (const auto& name : c.names()) (void)c.get(name).numel();
  } catch (const avdit::BadInput&) {
  }
  return 0;
}
