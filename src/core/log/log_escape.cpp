#include "core/log/log_escape.h"

namespace llmgw {
namespace {

std::string escape(std::string_view in, std::size_t cap, bool keep_quote) {
    static const char hex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(in.size() < cap ? in.size() : cap);
    for (std::size_t i = 0; i < in.size(); ++i) {
        auto c = static_cast<unsigned char>(in[i]);
        bool plain = c >= 0x20 && c <= 0x7E && c != '\\' && (c != '"' || keep_quote);
        std::size_t need = plain ? 1 : 4;
        if (out.size() + need > cap) {
            out.append(kLogCutMarker);
            return out;
        }
        if (plain) {
            out.push_back(static_cast<char>(c));
        } else {
            out.push_back('\\');
            out.push_back('x');
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 0x0F]);
        }
    }
    return out;
}

}  // namespace

std::string log_value(std::string_view in, std::size_t cap) { return escape(in, cap, false); }

std::string log_text(std::string_view in, std::size_t cap) { return escape(in, cap, true); }

}  // namespace llmgw
