// Writes Criteo-format text files (label, 13 integer counts, 26 hexadecimal categories,
// tab-separated; optionally gzip) from the synthetic teacher: the writer beside the Criteo reader
// (text_format.hpp), so the file path can be tested end to end without the real data set.
// A dense N(0,1) value x becomes the count expm1(x + 3) (the reader's log(1+count) gives back
// x + 3 above -3); a category id its low 32 bits in hex; a share `missing` of fields is left empty.
// Threading: runs on the calling thread.
#pragma once

#include "models/result.hpp"

#include <cstdint>
#include <string>

namespace satrap {

struct criteo_write_options {
  std::string out;                 // output folder (created)
  int64_t train_samples = 100000;  // training lines, over `files` files train-<i>.txt[.gz]
  int64_t test_samples = 20000;    // lines of test.txt[.gz]
  int files = 2;                   // training files
  bool gzip = false;               // write .gz files
  uint64_t seed = 42;              // the synthetic data set's seed (ids, teacher, labels)
  uint64_t vocab = 100000;         // distinct ids per category
  double missing = 0.05;           // share of empty fields (counts and categories)
};

struct criteo_write_summary {
  double test_oracle_auc = 0.0;  // AUC of the teacher's probabilities on the test file
};

// Whether the options make sense; the error (bad_input) says what was expected.
result<ok_t> criteo_write_check(const criteo_write_options& o);

// Writes the files; bad options are a bad_input error, a failed write a plain one.
result<criteo_write_summary> write_criteo_files(const criteo_write_options& o);

}  // namespace satrap
