// Merging the tools of federated MCP servers under unique names.
#include "core/mcp/tool_merge.h"

#include <memory>
#include <unordered_set>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace llmgw {
namespace {

namespace rj = rapidjson;
constexpr unsigned kFlags = rj::kParseValidateEncodingFlag | rj::kParseIterativeFlag;
constexpr int kMaxRenameRounds = 16;

struct Entry {
    std::size_t backend;
    const std::string* server;
    std::string own;
    rj::Value* tool;
    rj::Document* doc;
    std::string final_name;
};

}  // namespace

MergedTools merge_list(const std::vector<ServerTools>& servers, std::string_view array, std::string_view key,
                       bool rename) {
    const rj::Value array_name(rj::StringRef(array.data(), array.size()));
    const rj::Value key_name(rj::StringRef(key.data(), key.size()));
    MergedTools out;
    std::vector<std::unique_ptr<rj::Document>> docs;
    std::vector<Entry> entries;
    std::unordered_map<std::string, unsigned> count;
    for (const ServerTools& s : servers) {
        std::unordered_set<std::string> seen;   // a server's own duplicates: the first counts
        for (const std::string& page : s.pages) {
            auto doc = std::make_unique<rj::Document>();
            doc->Parse<kFlags>(page.data(), page.size());
            if (doc->HasParseError() || !doc->IsObject()) continue;
            auto tools = doc->FindMember(array_name);
            if (tools == doc->MemberEnd() || !tools->value.IsArray()) continue;
            for (rj::Value& t : tools->value.GetArray()) {
                auto name = t.IsObject() ? t.FindMember(key_name) : rj::Value::MemberIterator();
                if (!t.IsObject() || name == t.MemberEnd() || !name->value.IsString() ||
                    name->value.GetStringLength() == 0 || entries.size() >= kMaxFederatedTools) {
                    ++out.skipped;
                    continue;
                }
                std::string own(name->value.GetString(), name->value.GetStringLength());
                if (!seen.insert(own).second || (!rename && count[own] > 0)) {
                    ++out.skipped;   // a server's own duplicate; without renaming, the first owner wins
                    continue;
                }
                ++count[own];
                entries.push_back(Entry{s.backend, &s.server, std::move(own), &t, doc.get(), {}});
            }
            docs.push_back(std::move(doc));
        }
    }
    for (Entry& e : entries) {
        e.final_name = !rename || count[e.own] == 1 ? e.own : *e.server + "__" + e.own;
    }
    // Server names may hold "__" too, so a renamed name can still meet
    // another: a kept name equal to a renamed one is renamed in turn, and
    // renamed names that meet each other are all renamed again, until every
    // name is unique (entries of different servers part at once; the rounds
    // are bounded, and a name still shared after them is listed once, for
    // the first entry holding it: never two routes under one name).
    for (int round = 0; round < kMaxRenameRounds; ++round) {
        std::unordered_map<std::string, unsigned> held, held_renamed;
        for (const Entry& e : entries) {
            ++held[e.final_name];
            if (e.final_name != e.own) ++held_renamed[e.final_name];
        }
        bool changed = false;
        for (Entry& e : entries) {
            if (held[e.final_name] < 2) continue;
            const unsigned renamed = held_renamed[e.final_name];
            if (e.final_name == e.own ? renamed > 0 : renamed > 1) {
                e.final_name = *e.server + "__" + e.final_name;
                changed = true;
            }
        }
        if (!changed) break;
    }
    rj::StringBuffer buf;
    rj::Writer<rj::StringBuffer> w(buf);
    w.StartArray();
    for (Entry& e : entries) {
        if (out.routes.count(e.final_name) != 0) {
            ++out.skipped;
            continue;
        }
        if (e.final_name != e.own) {
            e.tool->FindMember(key_name)->value.SetString(
                e.final_name.data(), static_cast<rj::SizeType>(e.final_name.size()), e.doc->GetAllocator());
        }
        e.tool->Accept(w);
        out.routes[e.final_name] = ToolRoute{e.backend, e.own};
    }
    w.EndArray();
    out.tools_json.assign(buf.GetString(), buf.GetSize());
    return out;
}

std::string next_cursor(const std::string& result_json) {
    rj::Document doc;
    doc.Parse<kFlags>(result_json.data(), result_json.size());
    if (doc.HasParseError() || !doc.IsObject()) return {};
    auto it = doc.FindMember("nextCursor");
    if (it == doc.MemberEnd() || !it->value.IsString()) return {};
    return std::string(it->value.GetString(), it->value.GetStringLength());
}

}  // namespace llmgw
