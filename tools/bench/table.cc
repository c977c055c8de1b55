// Table layout: column widths from the widest cell, Markdown alignment markers in the rule.
#include "tools/bench/table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace tessera::bench {

Table::Table(std::vector<std::string> headers)
    : headers_(std::move(headers)), right_(headers_.size(), false) {}

void Table::add_row(std::vector<std::string> cells) {
  TS_CHECK(cells.size() == headers_.size(), "table", "expected ", headers_.size(),
           " cells in a row, got ", cells.size());
  rows_.push_back(std::move(cells));
}

void Table::align_right(size_t column) {
  TS_CHECK(column < headers_.size(), "table", "expected a column index below ", headers_.size(),
           ", got ", column);
  right_[column] = true;
}

std::string Table::render() const {
  std::vector<size_t> width(headers_.size(), 3);  // a rule needs at least "---"
  for (size_t c = 0; c < headers_.size(); ++c) {
    width[c] = std::max(width[c], headers_[c].size());
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      out += " " + (right_[c] ? pad + cells[c] : cells[c] + pad) + " |";
    }
    return out + "\n";
  };
  std::string out = line(headers_);
  out += "|";
  for (size_t c = 0; c < headers_.size(); ++c) {
    out += " " + std::string(width[c] - (right_[c] ? 1 : 0), '-') + (right_[c] ? ":" : "") + " |";
  }
  out += "\n";
  for (const auto& row : rows_) out += line(row);
  return out;
}

std::string format_number(double value, int decimals) {
  const double mag = std::fabs(value);
  if (mag >= 1000.0) {
    decimals = 0;
  } else if (mag > 0.0) {
    while (decimals < 9 && mag < 100.0 * std::pow(10.0, -decimals)) ++decimals;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  return buf;
}

}  // namespace tessera::bench
