// multipart/form-data (RFC 7578 over RFC 2046), read for one purpose: find
// the form's "model" field so that its value can be replaced and every other
// byte sent on unchanged (no nginx). The body is one contiguous view (a
// memory buffer or the mapped temp file); the scan keeps nothing but the
// offsets of the model value and at most kMaxModelBytes of it, and skips
// part contents with memchr, so a 25 MB upload costs no copy.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace llmgw {

// The boundary of a Content-Type value whose media type is exactly
// multipart/form-data (case-insensitive, parameters after ';'); "" when the
// type is another one or the boundary parameter is missing, empty, over 70
// bytes or not made of RFC 2046 boundary characters.
std::string form_data_boundary(std::string_view content_type);

enum class FormStatus {
    Ok,
    Malformed,        // not a well-formed multipart body (delimiters, part headers, close)
    NoModel,          // no "model" field, or an empty one
    DuplicateModel,   // more than one "model" field
};

struct FormScan {
    FormStatus status = FormStatus::Malformed;
    std::size_t parts = 0;
    // The model field's value: its bytes are body[model_at, model_at + model_len).
    std::size_t model_at = 0;
    std::size_t model_len = 0;
    std::string model;   // its first kMaxModelBytes bytes
    bool model_truncated = false;
};

inline constexpr std::size_t kMaxModelBytes = 512;        // a longer value names no model
inline constexpr std::size_t kMaxPartHeaderBytes = 8192;  // one part's header block
inline constexpr std::size_t kMaxFormParts = 1000;

// Scans a whole body. Malformed wins over the model checks (a body whose
// structure is broken says nothing reliable about its fields).
FormScan scan_form_data(std::string_view body, std::string_view boundary);

}  // namespace llmgw
