#include "gos/os/flags.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gos::os {

std::string FormatDurationMs(int64_t ms) {
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

bool ParseDuration(const std::string& text, std::chrono::microseconds* out,
                   int64_t default_unit_us) {
  if (text.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || v < 0) return false;
  std::string unit(end);
  double scale;
  if (unit.empty())
    scale = static_cast<double>(default_unit_us);
  else if (unit == "us")
    scale = 1;
  else if (unit == "ms")
    scale = 1e3;
  else if (unit == "s")
    scale = 1e6;
  else if (unit == "m" || unit == "min")
    scale = 60e6;
  else if (unit == "h")
    scale = 3600e6;
  else
    return false;
  *out = std::chrono::microseconds(static_cast<int64_t>(v * scale + 0.5));
  return true;
}

Flags::Flags(int argc, char** argv, const char* usage, bool stop_at_positional)
    : usage_(usage), stop_at_positional_(stop_at_positional) {
  program_ = argc > 0 ? argv[0] : "gos";
  if (auto slash = program_.rfind('/'); slash != std::string::npos) program_.erase(0, slash + 1);
  for (int i = 1; i < argc; ++i) args_.emplace_back(argv[i]);
}

void Flags::Add(const std::string& names, bool takes_value,
                std::function<bool(const std::string&)> set, bool optional_value) {
  Spec s{{}, takes_value, optional_value, std::move(set)};
  size_t start = 0;
  while (true) {
    size_t bar = names.find('|', start);
    s.names.push_back(names.substr(start, bar - start));
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  specs_.push_back(std::move(s));
}

void Flags::String(const std::string& names, std::string* out) {
  Add(names, true, [out](const std::string& v) {
    *out = v;
    return true;
  });
}

void Flags::Strings(const std::string& names, std::vector<std::string>* out) {
  Add(names, true, [out](const std::string& v) {
    out->push_back(v);
    return true;
  });
}

void Flags::U32(const std::string& names, uint32_t* out, uint32_t min) {
  Add(names, true, [this, out, min](const std::string& v) {
    char* end = nullptr;
    unsigned long x = std::strtoul(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || x > 0xffffffffUL) return false;
    if (x < min) {
      value_error_ = "must be at least " + std::to_string(min);
      return false;
    }
    *out = static_cast<uint32_t>(x);
    return true;
  });
}

void Flags::Bool(const std::string& names, bool* out) {
  Add(names, false, [out](const std::string&) {
    *out = true;
    return true;
  });
}

void Flags::OptionalValue(const std::string& names, bool* present, std::string* value) {
  Add(
      names, false,
      [present, value](const std::string& v) {
        *present = true;
        *value = v;
        return true;
      },
      /*optional_value=*/true);
}

const Flags::Spec* Flags::Find(const std::string& name) const {
  for (const auto& s : specs_) {
    for (const auto& n : s.names) {
      if (n == name) return &s;
    }
  }
  return nullptr;
}

int Flags::Parse() {
  for (size_t i = 0; i < args_.size(); ++i) {
    const std::string& a = args_[i];
    if (a == "-h" || a == "--help") {
      std::fputs(usage_, stdout);
      return 0;
    }
    if (a == "--version") {
      std::printf("%s (gos) %s\n", program_.c_str(), GOS_VERSION);
      return 0;
    }
    if (a == "--") {
      positional_.insert(positional_.end(), args_.begin() + static_cast<long>(i) + 1, args_.end());
      return -1;
    }
    if (a.size() < 2 || a[0] != '-') {
      if (stop_at_positional_) {
        positional_.insert(positional_.end(), args_.begin() + static_cast<long>(i), args_.end());
        return -1;
      }
      positional_.push_back(a);
      continue;
    }
    std::string name = a, value;
    bool has_value = false;
    if (auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    const Spec* s = Find(name);
    if (s == nullptr) {
      std::fprintf(stderr, "%s: unknown option %s (see --help)\n", program_.c_str(), name.c_str());
      return 2;
    }
    if (s->takes_value && !has_value) {
      if (i + 1 >= args_.size()) {
        std::fprintf(stderr, "%s: %s needs a value (see --help)\n", program_.c_str(), name.c_str());
        return 2;
      }
      value = args_[++i];
    } else if (!s->takes_value && has_value && !s->optional_value) {
      std::fprintf(stderr, "%s: %s takes no value\n", program_.c_str(), name.c_str());
      return 2;
    }
    value_error_.clear();
    if (!s->set(value)) {
      if (!value_error_.empty()) {
        std::fprintf(stderr, "%s: %s %s\n", program_.c_str(), name.c_str(), value_error_.c_str());
      } else {
        std::fprintf(stderr, "%s: bad value \"%s\" for %s (see --help)\n", program_.c_str(),
                     value.c_str(), name.c_str());
      }
      return 2;
    }
  }
  return -1;
}

}  // namespace gos::os
