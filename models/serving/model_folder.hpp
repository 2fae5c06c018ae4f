// Inside models/serving (not for other code): what the writer (export_model.cpp) and the reader
// (exported_model.cpp) of a model folder share: the embeddings files' header constants and the
// MODEL.json manifest (exported_model_meta.cpp). The layout is in exported_model.hpp.
// Threading: pure functions.
#pragma once

#include "models/serving/exported_model.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace satrap::model_folder {

inline constexpr uint64_t emb_magic = 0x3130424d45544153ULL;  // "SATEMB01" little-endian
inline constexpr uint64_t empty_row = ~uint64_t{0};           // an empty slot's row number
inline constexpr size_t header_words = 8;                     // uint64 words before the table

// MODEL.json's fields of `m` (the writer adds dense, files and rows).
nlohmann::json meta_json(const exported_model_meta& m);
// The meta of MODEL.json's text `j`; `where` names the file in errors.
result<exported_model_meta> meta_from_json(const nlohmann::json& j, const std::string& where);
// <dir>/MODEL.json, parsed; an error when it is missing (an unfinished export) or not JSON.
result<nlohmann::json> read_manifest(const std::string& dir);

}  // namespace satrap::model_folder
