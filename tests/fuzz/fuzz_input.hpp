// Reading typed values off a fuzzer's input, and the harnesses' own check
// (a broken invariant aborts, which libFuzzer reports as a crash with the
// input that caused it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace fuzz {

class Input {
  public:
    Input(const uint8_t *data, size_t size) : p_(data), left_(size) {}

    // A value from the next sizeof(T) bytes; zero-filled past the end.
    template <class T> T take() {
        T v{};
        const size_t n = left_ < sizeof(T) ? left_ : sizeof(T);
        if (n) {
            memcpy(&v, p_, n);
        }
        p_ += n;
        left_ -= n;
        return v;
    }
    // Up to max bytes, their count given by the next byte.
    std::vector<uint8_t> bytes(size_t max) {
        size_t n = take<uint8_t>();
        n = n > max ? max : n;
        n = n > left_ ? left_ : n;
        std::vector<uint8_t> out(p_, p_ + n);
        p_ += n;
        left_ -= n;
        return out;
    }
    // A string up to the next NUL byte (or the end).
    std::string str() {
        size_t n = 0;
        while (n < left_ && p_[n] != 0) {
            ++n;
        }
        std::string s(reinterpret_cast<const char *>(p_), n);
        const size_t used = n < left_ ? n + 1 : n;
        p_ += used;
        left_ -= used;
        return s;
    }
    std::vector<uint8_t> rest() {
        std::vector<uint8_t> out(p_, p_ + left_);
        p_ += left_;
        left_ = 0;
        return out;
    }
    size_t left() const { return left_; }

  private:
    const uint8_t *p_;
    size_t left_;
};

[[noreturn]] inline void fail(const char *what, const char *file, int line) {
    fprintf(stderr, "fuzz: invariant broken at %s:%d: %s\n", file, line, what);
    abort();
}

} // namespace fuzz

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fuzz::fail(#cond, __FILE__, __LINE__);                                                 \
        }                                                                                          \
    } while (0)
