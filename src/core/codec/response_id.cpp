#include "core/codec/response_id.h"

#include <chrono>
#include <cstdint>
#include <exception>
#include <random>

namespace llmgw {

std::string response_id(std::string_view prefix) {
    static const char kAlphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    // The generator is the thread's (a worker has one), seeded once.
    thread_local std::mt19937_64 rng = [] {
        std::uint64_t seed =
            static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
            static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
        try {
            std::random_device rd;
            seed ^= (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
        } catch (const std::exception&) {
        }
        return std::mt19937_64(seed);
    }();
    std::string s(prefix);
    for (int i = 0; i < 24; ++i) s += kAlphabet[rng() % 62];
    return s;
}

}  // namespace llmgw
