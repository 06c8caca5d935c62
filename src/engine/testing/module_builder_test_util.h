// A tiny WebAssembly binary writer for the engine's tests: builds modules as bytes in the
// test itself (no checked-in binaries), so a test can make a module exactly at, or one past,
// a bound. Test-only; no validation beyond what the tests need.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/wasm_module_info.h"

namespace wk::engine::testing {

using Bytes = std::vector<std::uint8_t>;

inline void Leb(Bytes& out, std::uint64_t v) { AppendUleb128(out, v); }

inline void Append(Bytes& out, const Bytes& b) { out.insert(out.end(), b.begin(), b.end()); }

inline void Name(Bytes& out, const std::string& s) {
  Leb(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

// Builds a module with one memory exported as "memory", a function type `() -> i32`
// (type 0) and whatever the test adds. Sections are written in the binary format's order.
struct ModuleBuilder {
  struct Table {
    std::uint32_t min = 0;
    std::optional<std::uint32_t> max;
  };
  struct Func {
    std::uint32_t type = 0;
    Bytes locals;  // the encoded local declarations (vector of (count, type)), with its count
    Bytes body;    // instructions, without the final `end`
  };

  std::uint32_t extra_types = 0;  // copies of `() -> ()` after type 0 (type 1 on)
  std::uint32_t extra_imports = 0;  // function imports "test"."add" are not added; these are "x"."f{i}"
  std::vector<Table> tables;
  std::uint32_t memory_min = 1;
  std::optional<std::uint32_t> memory_max = 4;
  std::uint32_t tags = 0;     // exception tags of type 1 (needs extra_types >= 1)
  std::uint32_t globals = 0;  // immutable i32 globals
  std::vector<Func> funcs;
  std::vector<std::string> func_exports;  // exports of functions 0..n-1 by these names
  std::uint32_t extra_exports = 0;        // more exports of function 0
  // Active element segments on table 0 at offset 0, each of this many ref.func 0 entries.
  std::vector<std::uint32_t> elem_segments;
  // Active data segments at offset 0, each this many bytes.
  std::vector<std::uint32_t> data_segments;

  // A function `() -> i32` returning `value`.
  static Func Returns(std::int32_t value) {
    Func f;
    f.locals = {0};
    f.body = {0x41};
    Leb(f.body, static_cast<std::uint32_t>(value) & 0x3f);  // small non-negative constants only
    return f;
  }

  Bytes Build() const {
    Bytes m = {0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00};
    auto section = [&](std::uint8_t id, const Bytes& payload) {
      m.push_back(id);
      Leb(m, payload.size());
      Append(m, payload);
    };
    {
      Bytes p;
      Leb(p, 1 + extra_types);
      Append(p, {0x60, 0x00, 0x01, 0x7f});
      for (std::uint32_t i = 0; i < extra_types; ++i) Append(p, {0x60, 0x00, 0x00});
      section(1, p);
    }
    if (extra_imports > 0) {
      Bytes p;
      Leb(p, extra_imports);
      for (std::uint32_t i = 0; i < extra_imports; ++i) {
        Name(p, "x");
        Name(p, "f" + std::to_string(i));
        Append(p, {0x00, 0x00});
      }
      section(2, p);
    }
    if (!funcs.empty()) {
      Bytes p;
      Leb(p, funcs.size());
      for (const Func& f : funcs) Leb(p, f.type);
      section(3, p);
    }
    if (!tables.empty()) {
      Bytes p;
      Leb(p, tables.size());
      for (const Table& t : tables) {
        p.push_back(0x70);
        p.push_back(t.max ? 0x01 : 0x00);
        Leb(p, t.min);
        if (t.max) Leb(p, *t.max);
      }
      section(4, p);
    }
    {
      Bytes p = {0x01, static_cast<std::uint8_t>(memory_max ? 0x01 : 0x00)};
      Leb(p, memory_min);
      if (memory_max) Leb(p, *memory_max);
      section(5, p);
    }
    if (tags > 0) {
      Bytes p;
      Leb(p, tags);
      for (std::uint32_t i = 0; i < tags; ++i) Append(p, {0x00, 0x01});
      section(13, p);
    }
    if (globals > 0) {
      Bytes p;
      Leb(p, globals);
      for (std::uint32_t i = 0; i < globals; ++i) Append(p, {0x7f, 0x00, 0x41, 0x00, 0x0b});
      section(6, p);
    }
    {
      Bytes p;
      Leb(p, 1 + func_exports.size() + extra_exports);
      Name(p, "memory");
      Append(p, {0x02, 0x00});
      for (std::size_t i = 0; i < func_exports.size(); ++i) {
        Name(p, func_exports[i]);
        p.push_back(0x00);
        Leb(p, extra_imports + i);
      }
      for (std::uint32_t i = 0; i < extra_exports; ++i) {
        Name(p, "e" + std::to_string(i));
        p.push_back(0x00);
        Leb(p, extra_imports);
      }
      section(7, p);
    }
    if (!elem_segments.empty()) {
      Bytes p;
      Leb(p, elem_segments.size());
      for (std::uint32_t n : elem_segments) {
        Append(p, {0x00, 0x41, 0x00, 0x0b});  // active, table 0, offset i32.const 0
        Leb(p, n);
        for (std::uint32_t i = 0; i < n; ++i) Leb(p, extra_imports);
      }
      section(9, p);
    }
    if (!funcs.empty()) {
      Bytes p;
      Leb(p, funcs.size());
      for (const Func& f : funcs) {
        Bytes body = f.locals;
        Append(body, f.body);
        body.push_back(0x0b);
        Leb(p, body.size());
        Append(p, body);
      }
      section(10, p);
    }
    if (!data_segments.empty()) {
      Bytes p;
      Leb(p, data_segments.size());
      for (std::uint32_t n : data_segments) {
        Append(p, {0x00, 0x41, 0x00, 0x0b});
        Leb(p, n);
        p.insert(p.end(), n, 0x2a);
      }
      section(11, p);
    }
    return m;
  }
};

}  // namespace wk::engine::testing
