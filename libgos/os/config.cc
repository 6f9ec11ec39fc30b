#include "gos/os/config.h"

#include <toml++/toml.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <vector>

#include "gos/os/flags.h"

namespace gos::os {
namespace {

// One key of the file: its dotted name and how it sets a Config field from a node ("" when it
// did, else why not).
struct Key {
  const char* name;
  std::function<std::string(const toml::node&, Config*)> set;
};

std::string Quoted(const toml::node& v) {
  std::ostringstream s;
  if (v.is_string()) {
    s << '"' << v.as_string()->get() << '"';
  } else if (v.is_table()) {
    s << "a table";
  } else if (v.is_array()) {
    s << "an array";
  } else {
    v.visit([&s](const auto& x) { s << x; });
  }
  return s.str();
}

// How a string value is checked.
enum class Text { kAny, kAbsolutePath, kAddress, kAddressOrPath };

// Each maker takes the field as a function from a Config to a reference to it.
template <typename Field>
Key StringKey(const char* name, Field field, Text kind) {
  return {name, [field, kind](const toml::node& v, Config* c) -> std::string {
            if (!v.is_string()) return Quoted(v) + " is not a string";
            const std::string& s = v.as_string()->get();
            if (s.empty()) return "must not be empty";
            const bool path = s[0] == '/';
            const size_t colon = s.rfind(':');
            const bool address = colon != std::string::npos && colon > 0 && colon + 1 < s.size() &&
                                 s.find_first_not_of("0123456789", colon + 1) == std::string::npos;
            if (kind == Text::kAbsolutePath && !path) return Quoted(v) + " is not an absolute path";
            if (kind == Text::kAddress && !address)
              return Quoted(v) + " is not an address host:port";
            if (kind == Text::kAddressOrPath && !address && !path) {
              return Quoted(v) + " is neither an address host:port nor an absolute path";
            }
            field(*c) = s;
            return "";
          }};
}

template <typename Field>
Key U32Key(const char* name, Field field, uint32_t min, uint32_t max) {
  return {name, [field, min, max](const toml::node& v, Config* c) -> std::string {
            if (!v.is_integer()) return Quoted(v) + " is not an integer";
            const int64_t x = v.as_integer()->get();
            if (x < min || x > max) {
              return std::to_string(x) + " is not in " + std::to_string(min) + ".." +
                     std::to_string(max);
            }
            field(*c) = static_cast<uint32_t>(x);
            return "";
          }};
}

// A duration is a string with a unit, so that "10" cannot mean 10 of a unit the reader did not
// have in mind.
template <typename Field>
Key DurationKey(const char* name, Field field, std::chrono::microseconds min) {
  return {name, [field, min](const toml::node& v, Config* c) -> std::string {
            if (!v.is_string()) return Quoted(v) + " is not a duration string such as \"10ms\"";
            const std::string& s = v.as_string()->get();
            std::chrono::microseconds us;
            const bool unit = !s.empty() && std::isalpha(static_cast<unsigned char>(s.back()));
            if (!unit || !ParseDuration(s, &us)) {
              return Quoted(v) + " is not a duration with a unit (us, ms, s, m, h)";
            }
            if (us < min) {
              return Quoted(v) + " is shorter than " +
                     (min.count() % 1000 == 0 ? FormatDurationMs(min.count() / 1000)
                                              : std::to_string(min.count()) + "us");
            }
            auto& out = field(*c);
            out = std::chrono::duration_cast<std::remove_reference_t<decltype(out)>>(us);
            return "";
          }};
}

#define GOS_CONFIG_FIELD(f) \
  [](Config & c) -> auto& { return c.f; }

const std::vector<Key>& Keys() {
  using std::chrono::microseconds;
  static const std::vector<Key> keys = {
      StringKey("coordinator", GOS_CONFIG_FIELD(coordinator), Text::kAddressOrPath),
      StringKey("listen", GOS_CONFIG_FIELD(listen), Text::kAddress),
      StringKey("key_file", GOS_CONFIG_FIELD(key_file), Text::kAbsolutePath),
      StringKey("state_dir", GOS_CONFIG_FIELD(state_dir), Text::kAbsolutePath),
      StringKey("scratch_dir", GOS_CONFIG_FIELD(scratch_dir), Text::kAbsolutePath),
      StringKey("provider", GOS_CONFIG_FIELD(provider), Text::kAny),
      DurationKey("timeslice", GOS_CONFIG_FIELD(timeslice), microseconds(100)),
      DurationKey("failure_timeout", GOS_CONFIG_FIELD(failure_timeout), microseconds(1000)),
      U32Key("nodes", GOS_CONFIG_FIELD(nodes), 1, 0xffffffffu),
      U32Key("mpl", GOS_CONFIG_FIELD(mpl), 1, 0xffffffffu),
      U32Key("keep_logs", GOS_CONFIG_FIELD(keep_logs), 0, 0xffffffffu),
      DurationKey("reattach", GOS_CONFIG_FIELD(reattach), microseconds(0)),
      DurationKey("checkpoint.interval", GOS_CONFIG_FIELD(checkpoint.interval), microseconds(1000)),
      U32Key("checkpoint.keep", GOS_CONFIG_FIELD(checkpoint.keep), 1, 0xffffffffu),
      U32Key("checkpoint.level", GOS_CONFIG_FIELD(checkpoint.level), 1, 19),
  };
  return keys;
}

#undef GOS_CONFIG_FIELD

std::string Where(const std::string& path, const toml::source_region& r) {
  return path + ":" + std::to_string(r.begin.line);
}

// Sets every key of `table` (prefix "" at the top, "checkpoint." inside [checkpoint]).
Status SetKeys(const std::string& path, const toml::table& table, const std::string& prefix,
               Config* c) {
  for (const auto& [key, value] : table) {
    const std::string name = prefix + std::string(key.str());
    if (prefix.empty() && name == "checkpoint") {
      if (!value.is_table()) {
        return InvalidArgumentError(Where(path, key.source()) + ": checkpoint: " + Quoted(value) +
                                    " is not a table ([checkpoint])");
      }
      GOS_RETURN_IF_ERROR(SetKeys(path, *value.as_table(), "checkpoint.", c));
      continue;
    }
    const Key* k = nullptr;
    for (const Key& candidate : Keys()) {
      if (name == candidate.name) k = &candidate;
    }
    if (k == nullptr) {
      return InvalidArgumentError(Where(path, key.source()) + ": " + name +
                                  ": unknown key (see docs/gos.conf.example)");
    }
    if (std::string e = k->set(value, c); !e.empty()) {
      return InvalidArgumentError(Where(path, value.source()) + ": " + name + ": " + e);
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<Config> LoadConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError(errno, "cannot read the config file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return ErrnoError(errno, "cannot read the config file " + path);
  toml::table table;
  try {
    table = toml::parse(text.str(), path);
  } catch (const toml::parse_error& e) {
    return InvalidArgumentError(Where(path, e.source()) + ": " + std::string(e.description()));
  }
  Config c;
  c.file = path;
  GOS_RETURN_IF_ERROR(SetKeys(path, table, "", &c));
  if (c.failure_timeout <= c.timeslice) {
    const auto* at = table.get("failure_timeout");
    if (at == nullptr) at = table.get("timeslice");
    return InvalidArgumentError(
        Where(path, at->source()) + ": " +
        (table.contains("failure_timeout") ? "failure_timeout" : "timeslice") +
        ": the failure timeout must be longer than the timeslice");
  }
  return c;
}

std::vector<std::string> ConfigKeys() {
  std::vector<std::string> names;
  for (const Key& k : Keys()) names.emplace_back(k.name);
  return names;
}

void ApplyEnvironment(Config* c) {
  auto env = [](const char* name, std::string* out) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') *out = v;
  };
  env("GOS_COORDINATOR", &c->coordinator);
  env("GOS_KEY_FILE", &c->key_file);
  env("GOS_STATE_DIR", &c->state_dir);
  env("GOS_FABRIC_PROVIDER", &c->provider);
}

StatusOr<Config> LoadProgramConfig(const std::string& system_file) {
  Config c;
  if (const char* named = std::getenv("GOS_CONFIG"); named != nullptr && *named != '\0') {
    auto loaded = LoadConfig(named);
    if (!loaded.ok() && loaded.status().code() != StatusCode::kInvalidArgument) {
      return loaded.status().WithContext("GOS_CONFIG");  // it must name a file there is
    }
    if (!loaded.ok()) return loaded.status();
    c = std::move(*loaded);
  } else {
    auto loaded = LoadConfig(system_file);
    if (loaded.ok()) {
      c = std::move(*loaded);
    } else if (loaded.status().code() != StatusCode::kNotFound) {
      return loaded.status();
    }
  }
  ApplyEnvironment(&c);
  return c;
}

int LoadConfigForMain(const char* program, Config* out) {
  auto c = LoadProgramConfig();
  if (!c.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, c.status().message().c_str());
    return 2;
  }
  *out = std::move(*c);
  return -1;
}

}  // namespace gos::os
