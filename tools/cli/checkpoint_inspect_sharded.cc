// `tessera checkpoint inspect DIR` of a sharded checkpoint (checkpoint.format sharded): every
// tensor with its dtype, global shape, bytes and pieces, every piece file with the rank that wrote
// it, and every file's and piece's checksum verified; each damaged piece is reported naming the
// tensor, the piece and the file (exit 1).
#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "models/io/piece_checkpoint.h"
#include "models/io/safetensors.h"
#include "tools/cli/inspect_sharded.h"

namespace tessera::cli {

int inspect_sharded(const std::string& dir) {
  const io::PieceReader reader = io::PieceReader::open(dir);  // the index, validated
  const std::vector<std::string> names = reader.names();
  size_t name_w = 4, pieces = 0;
  for (const std::string& n : names) name_w = std::max(name_w, n.size());
  std::cout << "\nsharded: " << reader.files().size() << " piece files (one per writing rank), "
            << names.size() << " tensors; index.json maps each to its pieces\n";
  std::printf("  %-*s  %-5s  %-16s  %10s  %s\n", int(name_w), "name", "dtype", "global shape",
              "bytes", "pieces");
  uint64_t total = 0;
  for (const std::string& n : names) {
    const io::StoredTensor& t = reader.tensor(n);
    const uint64_t bytes =
        uint64_t(shape_numel(t.shape)) * io::safetensors_dtype_size(t.dtype).value_or(0);
    total += bytes;
    pieces += t.pieces.size();
    std::printf("  %-*s  %-5s  %-16s  %10llu  %zu\n", int(name_w), n.c_str(), t.dtype.c_str(),
                shape_str(t.shape).c_str(), (unsigned long long)bytes, t.pieces.size());
  }
  std::cout << "\n  file                       rank  bytes       checksum\n";
  uint64_t file_bytes = 0;
  for (const auto& [file, f] : reader.files().items()) {
    file_bytes += f.value("bytes", uint64_t(0));
    std::printf("  %-25s  %4d  %10llu  %s\n", file.c_str(), f.value("rank", -1),
                (unsigned long long)f.value("bytes", uint64_t(0)),
                f.value("checksum", std::string("?")).c_str());
  }
  std::fflush(stdout);
  const std::vector<std::string> problems = reader.verify_all();
  std::cout << "\ntotal: " << names.size() << " tensors, " << total << " bytes of tensor data in "
            << pieces << " pieces, " << file_bytes << " bytes in files; ";
  if (problems.empty())
    std::cout << "checksums verified: all " << pieces << " pieces and " << reader.files().size()
              << " files\n";
  else
    std::cout << "checksums: " << problems.size() << " problem(s)\n";
  for (const std::string& p : problems) std::cerr << "tessera checkpoint inspect: " << p << "\n";
  return problems.empty() ? 0 : 1;
}

}  // namespace tessera::cli
