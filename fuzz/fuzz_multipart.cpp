// libFuzzer target: the multipart/form-data boundary parser and the form scan
// on arbitrary bytes. The first byte picks how the input is split: a
// Content-Type for form_data_boundary, then the body scanned with a fixed
// boundary and with the parsed one. Invariants checked: the model value lies
// inside the body, and an Ok scan's model bytes are the body's.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/http/multipart.h"

using namespace llmgw;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
    const std::size_t cut = data[0] < in.size() ? data[0] : in.size();
    std::string boundary = form_data_boundary(in.substr(0, cut));
    std::string_view body = in.substr(cut);
    for (std::string_view b : {std::string_view(boundary), std::string_view("XyZ")}) {
        FormScan s = scan_form_data(body, b);
        if (s.status == FormStatus::Ok) {
            if (s.model_at > body.size() || s.model_len > body.size() - s.model_at) std::abort();
            if (body.substr(s.model_at, s.model.size()) != s.model) std::abort();
            if (s.model_len == 0 || s.parts == 0) std::abort();
        }
    }
    return 0;
}
