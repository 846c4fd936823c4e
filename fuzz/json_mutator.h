// A structure-aware mutator for targets whose input is `head` bytes of
// choices followed by one JSON document (a request body, a users file, a
// provider's page). Half the time libFuzzer's own byte mutations; otherwise
// the document is parsed and one node changed as a JSON value: replaced by
// an interesting scalar (bounds of integers and doubles, empty and long
// strings, null), by an empty object or array, wrapped in an array, given a
// member named from the target's key list, a child removed or duplicated, a
// string's bytes mutated, or replaced by a copy of another node. Inputs that
// do not parse get byte mutations only. Include it in one translation unit
// and define the mutator with LLMGW_JSON_MUTATOR(head, keys).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "fuzz_util.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace llmgw {
namespace fuzz {

namespace rj = rapidjson;

inline void collect_nodes(rj::Value& v, std::vector<rj::Value*>& out) {
    std::vector<rj::Value*> stack{&v};
    while (!stack.empty() && out.size() < 4096) {
        rj::Value* n = stack.back();
        stack.pop_back();
        out.push_back(n);
        if (n->IsObject()) {
            for (auto& m : n->GetObject()) stack.push_back(&m.value);
        } else if (n->IsArray()) {
            for (auto& e : n->GetArray()) stack.push_back(&e);
        }
    }
}

inline void interesting_scalar(Rng& rng, rj::Value& out, rj::Document::AllocatorType& a,
                               const std::vector<const char*>& keys) {
    switch (rng.below(16)) {
    case 0: out.SetNull(); break;
    case 1: out.SetBool(rng.below(2) == 0); break;
    case 2: out.SetInt(0); break;
    case 3: out.SetInt(-1); break;
    case 4: out.SetInt64(INT64_MAX); break;
    case 5: out.SetUint64(UINT64_MAX); break;
    case 6: out.SetInt(static_cast<int>(rng.below(300))); break;
    case 7: out.SetDouble(0.5); break;
    case 8: out.SetDouble(1e308); break;
    case 9: out.SetDouble(-1e-300); break;
    case 10: out.SetString("", a); break;
    case 11: out.SetString(std::string(1 + rng.below(600), 'a').c_str(), a); break;
    case 12: out.SetString(rj::StringRef("\0x\n\"\\\xff", 6), a); break;
    case 13: out.SetInt64(INT64_MIN); break;
    default:
        if (!keys.empty()) {
            out.SetString(keys[rng.below(keys.size())], a);
        } else {
            out.SetString("x", a);
        }
        break;
    }
}

inline std::size_t mutate_json(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed,
                               std::size_t head, const std::vector<const char*>& keys) {
    Rng rng(seed);
    if (size <= head || rng.below(2) == 0) return LLVMFuzzerMutate(data, size, max_size);
    if (rng.below(16) == 0) {   // the choice bytes only
        LLVMFuzzerMutate(data, head, head);
        return size;
    }
    rj::Document doc;
    doc.Parse<rj::kParseIterativeFlag>(reinterpret_cast<const char*>(data + head), size - head);
    if (doc.HasParseError()) return LLVMFuzzerMutate(data, size, max_size);
    auto& a = doc.GetAllocator();
    std::vector<rj::Value*> nodes;
    collect_nodes(doc, nodes);
    rj::Value* n = nodes[rng.below(nodes.size())];
    switch (rng.below(9)) {
    case 0:
    case 1: interesting_scalar(rng, *n, a, keys); break;
    case 2:
        if (rng.below(2) == 0) {
            n->SetObject();
        } else {
            n->SetArray();
        }
        break;
    case 3: {   // wrapped in an array
        rj::Value inner(*n, a);
        n->SetArray();
        n->PushBack(inner, a);
        break;
    }
    case 4: {   // a member named from the key list (an object), an element (an array)
        rj::Value v;
        if (rng.below(3) == 0 && nodes.size() > 1) {
            v.CopyFrom(*nodes[rng.below(nodes.size())], a);
        } else if (rng.below(3) == 0) {
            v.SetObject();
        } else {
            interesting_scalar(rng, v, a, keys);
        }
        if (n->IsObject()) {
            rj::Value name;
            if (!keys.empty() && rng.below(8) != 0) {
                name.SetString(keys[rng.below(keys.size())], a);
            } else {
                name.SetString("x", a);
            }
            n->AddMember(name, v, a);
        } else if (n->IsArray()) {
            n->PushBack(v, a);
        } else {
            interesting_scalar(rng, *n, a, keys);
        }
        break;
    }
    case 5:   // a child removed
        if (n->IsObject() && n->MemberCount() > 0) {
            n->EraseMember(n->MemberBegin() + static_cast<long>(rng.below(n->MemberCount())));
        } else if (n->IsArray() && n->Size() > 0) {
            n->Erase(n->Begin() + static_cast<long>(rng.below(n->Size())));
        }
        break;
    case 6:   // a child duplicated
        if (n->IsArray() && n->Size() > 0) {
            rj::Value copy((*n)[static_cast<rj::SizeType>(rng.below(n->Size()))], a);
            n->PushBack(copy, a);
        } else if (n->IsObject() && n->MemberCount() > 0) {
            auto m = n->MemberBegin() + static_cast<long>(rng.below(n->MemberCount()));
            rj::Value name(m->name, a), value(m->value, a);
            n->AddMember(name, value, a);
        }
        break;
    case 7:   // a string's bytes
        if (n->IsString()) {
            std::string s(n->GetString(), n->GetStringLength());
            s.resize(s.size() + 16);
            const std::size_t len = LLVMFuzzerMutate(reinterpret_cast<std::uint8_t*>(&s[0]), s.size() - 16, s.size());
            s.resize(len);
            n->SetString(s.data(), static_cast<rj::SizeType>(s.size()), a);
        } else if (n->IsNumber()) {
            const double d = n->GetDouble();
            n->SetDouble(rng.below(2) == 0 ? -d : d * 1e10 + 1);
        }
        break;
    default:   // a copy of another node (not one holding n: no cycles, a copy is made first)
        if (nodes.size() > 1) {
            rj::Value copy(*nodes[rng.below(nodes.size())], a);
            n->Swap(copy);
        }
        break;
    }
    rj::StringBuffer sb;
    rj::Writer<rj::StringBuffer> w(sb);
    if (!doc.Accept(w) || head + sb.GetSize() > max_size) return LLVMFuzzerMutate(data, size, max_size);
    std::memcpy(data + head, sb.GetString(), sb.GetSize());
    return head + sb.GetSize();
}

}  // namespace fuzz
}  // namespace llmgw

#define LLMGW_JSON_MUTATOR(head, ...)                                                                    \
    extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) { \
        static const std::vector<const char*> keys = {__VA_ARGS__};                                       \
        return ::llmgw::fuzz::mutate_json(data, size, max_size, seed, head, keys);                       \
    }

namespace llmgw {
namespace fuzz {

// The same for inputs whose body is several JSON documents separated by
// sep (pages): one of them is mutated as above, the others kept.
inline std::size_t mutate_json_pages(std::uint8_t* data, std::size_t size, std::size_t max_size, unsigned seed,
                                     std::size_t head, char sep, const std::vector<const char*>& keys) {
    Rng rng(seed ^ 0x5bd1e995u);
    if (size <= head || rng.below(2) == 0) return LLVMFuzzerMutate(data, size, max_size);
    std::string body(reinterpret_cast<const char*>(data) + head, size - head);
    std::vector<std::string> pages;
    for (std::size_t p = 0;;) {
        const std::size_t q = body.find(sep, p);
        pages.push_back(body.substr(p, q == std::string::npos ? std::string::npos : q - p));
        if (q == std::string::npos) break;
        p = q + 1;
    }
    const std::size_t k = rng.below(pages.size() + 1);
    if (k == pages.size()) {   // a page duplicated (pagination that repeats itself)
        pages.push_back(pages[rng.below(pages.size())]);
    } else {
        std::string& page = pages[k];
        const std::size_t room = max_size > size ? max_size - size : 0;
        std::string buf = page;
        buf.resize(page.size() + room);
        const std::size_t n = mutate_json(reinterpret_cast<std::uint8_t*>(&buf[0]), page.size(), buf.size(),
                                          static_cast<unsigned>(rng.next()), 0, keys);
        buf.resize(n);
        page.swap(buf);
    }
    std::string joined;
    for (std::size_t i = 0; i < pages.size(); ++i) {
        if (i > 0) joined += sep;
        joined += pages[i];
    }
    if (head + joined.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
    std::memcpy(data + head, joined.data(), joined.size());
    return head + joined.size();
}

}  // namespace fuzz
}  // namespace llmgw

#define LLMGW_JSON_PAGES_MUTATOR(head, sep, ...)                                                         \
    extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) { \
        static const std::vector<const char*> keys = {__VA_ARGS__};                                       \
        return ::llmgw::fuzz::mutate_json_pages(data, size, max_size, seed, head, sep, keys);            \
    }
