// A small command-line parser shared by gos's daemons and tools: "--name value",
// "--name=value", short aliases ("-n|--ntasks"), boolean switches, durations with units
// ("500us", "10ms", "2s", "1m", "1h"), and positional arguments. Parsing stops at the first
// positional argument when stop_at_positional is set (gos-run: the rest is the program's).
#ifndef GOS_OS_FLAGS_H_
#define GOS_OS_FLAGS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gos::os {

// Parses "1.5s", "10ms", "500us", "2m", "1h" (or a bare number in default_unit_us units).
// Returns false on bad input.
bool ParseDuration(const std::string& text, std::chrono::microseconds* out,
                   int64_t default_unit_us = 1000000);

// The other way: "250ms", "1500ms", "30s", "5m", "2h", the largest unit that gives a whole
// number (ParseDuration reads it back).
std::string FormatDurationMs(int64_t ms);

class Flags {
 public:
  Flags(int argc, char** argv, const char* usage, bool stop_at_positional = false);

  // names: "--name" or "-n|--name".
  void String(const std::string& names, std::string* out);
  // A value below `min` is a usage error ("NAME must be at least MIN"); *out keeps its
  // default when the option is not given, so a default of 0 can mean "not given".
  void U32(const std::string& names, uint32_t* out, uint32_t min = 0);
  void Bool(const std::string& names, bool* out);
  // "--name" or "--name=value": *present = true, *value = value ("" without one).
  void OptionalValue(const std::string& names, bool* present, std::string* value);
  // Appends every occurrence.
  void Strings(const std::string& names, std::vector<std::string>* out);
  template <typename Rep, typename Period>
  void Duration(const std::string& names, std::chrono::duration<Rep, Period>* out,
                int64_t default_unit_us = 1000000) {
    Add(names, true, [out, default_unit_us](const std::string& v) {
      std::chrono::microseconds us;
      if (!ParseDuration(v, &us, default_unit_us)) return false;
      *out = std::chrono::duration_cast<std::chrono::duration<Rep, Period>>(us);
      return true;
    });
  }

  // Returns -1 to go on, else the exit code to return from main: 0 after --help (the usage)
  // or --version ("gos-run (gos) 0.1.0"), 2 after a usage error (already printed to stderr
  // with the program name).
  int Parse();
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  struct Spec {
    std::vector<std::string> names;
    bool takes_value;
    bool optional_value;
    std::function<bool(const std::string&)> set;
  };
  void Add(const std::string& names, bool takes_value, std::function<bool(const std::string&)> set,
           bool optional_value = false);
  const Spec* Find(const std::string& name) const;

  std::vector<std::string> args_;
  std::string program_;
  std::string value_error_;  // why the last value was refused, if more than "bad value"
  const char* usage_;
  bool stop_at_positional_;
  std::vector<Spec> specs_;
  std::vector<std::string> positional_;
};

}  // namespace gos::os

#endif  // GOS_OS_FLAGS_H_
