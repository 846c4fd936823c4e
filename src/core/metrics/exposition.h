// The Prometheus text exposition (no nginx): families declared with their
// TYPE and HELP, samples grouped under their family whatever order they come
// in, no series twice, label values escaped so the output is valid UTF-8 and
// the mapping injective (spec "Metrics endpoint").
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmgw {

// A label value for the exposition: double quote and newline escaped (\"
// \n); every byte of an invalid UTF-8 sequence becomes the marker \xHH in
// the value; a backslash of the name is doubled in the value, so a marker
// can never be confused with a name that holds "\x41" (injective). In the
// text every backslash of the value is escaped as \\.
std::string escape_label_value(std::string_view v);

using Labels = std::vector<std::pair<std::string_view, std::string_view>>;

class Exposition {
public:
    // type: counter or gauge. A counter's name ends in _total.
    void family(std::string name, std::string type, std::string help);
    // A sample of a declared family; a series already written is skipped
    // (false), so is a sample of an undeclared family.
    bool sample(std::string_view name, const Labels& labels, std::int64_t value);
    bool sample(std::string_view name, const Labels& labels, double value);
    // The text, families in declaration order (a family without samples
    // still has its HELP and TYPE lines).
    std::string text() const;

private:
    bool add(std::string_view name, const Labels& labels, const std::string& value);
    struct Family {
        std::string name, type, help;
        std::string lines;
    };
    std::vector<Family> families_;
    std::map<std::string, std::size_t, std::less<>> index_;
    std::set<std::string, std::less<>> series_;
};

}  // namespace llmgw
