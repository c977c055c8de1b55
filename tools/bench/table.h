// A plain-text table with padded columns in Markdown pipe syntax, so a bench run pastes straight
// into a report.
#pragma once

#include <string>
#include <vector>

namespace tessera::bench {

class Table {
 public:
  explicit Table(std::vector<std::string> headers);
  // Throws tessera::ValueError when the row's cell count differs from the header's.
  void add_row(std::vector<std::string> cells);
  // Numbers read better right-aligned; text columns stay left-aligned.
  void align_right(size_t column);
  size_t rows() const { return rows_.size(); }
  // Header, a `|---|` rule (`---:` for right-aligned columns), then the rows; one line each.
  std::string render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

// `decimals` digits after the point, more when needed to show three significant digits (so a
// slow run never reads as zero), none from 1000 up: (12.345, 2) "12.35", (5.5, 1) "5.50",
// (0.01234, 1) "0.0123", (1234.5, 1) "1235".
std::string format_number(double value, int decimals);

}  // namespace tessera::bench
