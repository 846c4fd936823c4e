// Helpers shared by the codec implementations (not for the shell).
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>

#include "core/codec/codec.h"

namespace llmgw {

std::unique_ptr<Codec> make_openai_codec(bool chat, const CodecOptions& opt);
std::unique_ptr<Codec> make_passthrough_codec(const CodecOptions& opt);

// Usage fields found in one JSON document (see sniff_usage); fields not found
// are left as they are, so calls over the events of a stream merge.
void sniff_usage_fields(std::string_view json, std::int64_t& prompt, std::int64_t& completion);

// Whether s is one complete JSON document.
bool is_json_document(std::string_view s);

// Whether a Content-Type names the media type (case-insensitive, parameters ignored).
inline bool is_media_type(std::string_view content_type, std::string_view type) {
    if (content_type.size() < type.size()) return false;
    for (std::size_t i = 0; i < type.size(); ++i) {
        char c = content_type[i];
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (c != type[i]) return false;
    }
    return content_type.size() == type.size() || content_type[type.size()] == ';' ||
           content_type[type.size()] == ' ';
}

}  // namespace llmgw
