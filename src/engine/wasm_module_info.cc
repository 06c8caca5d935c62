#include "engine/wasm_module_info.h"

#include <fmt/format.h>

namespace wk::engine {
namespace {

constexpr std::uint8_t kSectionType = 1, kSectionImport = 2, kSectionFunction = 3, kSectionTable = 4,
                       kSectionMemory = 5, kSectionGlobal = 6, kSectionExport = 7, kSectionElement = 9,
                       kSectionCode = 10, kSectionData = 11, kSectionTag = 13;
// Bounds against absurd counts in hostile input: no real module comes near them, and they
// keep a malformed count from allocating gigabytes before the bytes run out.
constexpr std::uint32_t kMaxItems = 1'000'000;

// A cursor over bytes; every read checks bounds and reports the offset of a problem.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> bytes, std::size_t base = 0)
      : bytes_(bytes), base_(base) {}

  std::size_t offset() const { return base_ + pos_; }
  bool done() const { return pos_ == bytes_.size(); }

  Result<std::uint8_t> Byte() {
    if (pos_ >= bytes_.size()) return Truncated();
    return bytes_[pos_++];
  }
  Result<std::uint64_t> Leb(unsigned max_bits) {
    const unsigned max_bytes = (max_bits + 6) / 7;
    std::uint64_t value = 0;
    for (unsigned i = 0;; ++i) {
      if (i == max_bytes) return Malformed("LEB128 number too long");
      auto b = Byte();
      if (!b.ok()) return b.status();
      value |= std::uint64_t{*b & 0x7fu} << (7 * i);
      if ((*b & 0x80) == 0) break;
    }
    if (max_bits < 64 && (value >> max_bits) != 0) return Malformed("LEB128 number out of range");
    return value;
  }
  Result<std::uint32_t> U32() {
    auto v = Leb(32);
    if (!v.ok()) return v.status();
    return static_cast<std::uint32_t>(*v);
  }
  Result<std::uint32_t> Count(std::uint32_t max = kMaxItems, std::string_view what = "items") {
    auto n = U32();
    if (!n.ok()) return n;
    if (*n > bytes_.size() - pos_) return Malformed("item count exceeds the section");
    if (*n > max) return Malformed(fmt::format("{} {} (more than {})", *n, what, max));
    return n;
  }
  // A count bounded by one of the module limits (wasm_module_info.h): the error names it.
  Result<std::uint32_t> LimitedCount(std::uint32_t max, std::string_view what) {
    auto n = U32();
    if (!n.ok()) return n;
    if (*n > max) return OverLimit(*n, max, what);
    if (*n > bytes_.size() - pos_) return Malformed("item count exceeds the section");
    return n;
  }
  static Status OverLimit(std::uint64_t n, std::uint64_t max, std::string_view what) {
    return InvalidArgument(fmt::format("the module declares {} {}, over the limit of {} (docs/abi.md, \"Limits\")",
                                       n, what, max));
  }
  // Skips a signed LEB128 number of at most `max_bits` bits (the reader never needs its value).
  Status SkipSignedLeb(unsigned max_bits) {
    const unsigned max_bytes = (max_bits + 6) / 7;
    for (unsigned i = 0;; ++i) {
      if (i == max_bytes) return Malformed("LEB128 number too long");
      auto b = Byte();
      if (!b.ok()) return b.status();
      if ((*b & 0x80) == 0) return Status::Ok();
    }
  }
  Result<std::span<const std::uint8_t>> Bytes(std::size_t n) {
    if (n > bytes_.size() - pos_) return Truncated();
    auto s = bytes_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  Result<std::string> Name() {
    auto n = U32();
    if (!n.ok()) return n.status();
    auto b = Bytes(*n);
    if (!b.ok()) return b.status();
    return std::string(reinterpret_cast<const char*>(b->data()), b->size());
  }
  Status Malformed(std::string_view what) const {
    return InvalidArgument(fmt::format("not a valid WebAssembly module: {} at byte {}", what, offset()));
  }

 private:
  Status Truncated() const { return Malformed("unexpected end"); }
  std::span<const std::uint8_t> bytes_;
  std::size_t base_;
  std::size_t pos_ = 0;
};

Result<ValType> ReadValType(Reader& r) {
  auto b = r.Byte();
  if (!b.ok()) return b.status();
  switch (*b) {
    case 0x7f: return ValType::kI32;
    case 0x7e: return ValType::kI64;
    case 0x7d: return ValType::kF32;
    case 0x7c: return ValType::kF64;
    case 0x7b: return ValType::kV128;
    case 0x70: return ValType::kFuncRef;
    case 0x6f: return ValType::kExternRef;
    default: return r.Malformed(fmt::format("unknown value type 0x{:02x}", *b));
  }
}

Result<MemoryLimits> ReadLimits(Reader& r, bool is_memory) {
  auto flags = r.Byte();
  if (!flags.ok()) return flags.status();
  if (*flags > 1) {
    return r.Malformed(is_memory ? "shared or 64-bit memories are not supported"
                                 : "unsupported table limits");
  }
  MemoryLimits lim;
  auto min = r.U32();
  if (!min.ok()) return min.status();
  lim.min_pages = *min;
  if (*flags == 1) {
    auto max = r.U32();
    if (!max.ok()) return max.status();
    if (*max < *min) return r.Malformed("limits maximum below minimum");
    lim.max_pages = *max;
  }
  return lim;
}

// Skips a constant expression (global initializers, segment offsets, element expressions)
// through its `end`. Only the instructions V8 10.2 accepts there; V8 checks their types.
Status SkipConstExpr(Reader& r) {
  for (;;) {
    auto op = r.Byte();
    if (!op.ok()) return op.status();
    Status s = Status::Ok();
    switch (*op) {
      case 0x0b: return Status::Ok();                                   // end
      case 0x41: s = r.SkipSignedLeb(32); break;                        // i32.const
      case 0x42: s = r.SkipSignedLeb(64); break;                        // i64.const
      case 0x43: s = r.Bytes(4).status(); break;                        // f32.const
      case 0x44: s = r.Bytes(8).status(); break;                        // f64.const
      case 0x23: s = r.U32().status(); break;                           // global.get
      case 0xd0: s = r.Byte().status(); break;                          // ref.null
      case 0xd2: s = r.U32().status(); break;                           // ref.func
      case 0xfd: {                                                      // v128.const
        auto sub = r.U32();
        if (!sub.ok()) return sub.status();
        if (*sub != 12) return r.Malformed("unsupported instruction in a constant expression");
        s = r.Bytes(16).status();
        break;
      }
      default: return r.Malformed(fmt::format("unsupported instruction 0x{:02x} in a constant expression", *op));
    }
    if (!s.ok()) return s;
  }
}

Result<TableLimits> ReadTableType(Reader& r) {
  auto t = ReadValType(r);
  if (!t.ok()) return t.status();
  if (*t != ValType::kFuncRef && *t != ValType::kExternRef) return r.Malformed("table of a non-reference type");
  auto l = ReadLimits(r, false);
  if (!l.ok()) return l.status();
  return TableLimits{*t, l->min_pages, l->max_pages, false};
}


struct Section {
  std::uint8_t id;
  std::size_t header_start;   // offset of the id byte
  std::size_t payload_start;  // offset of the payload
  std::size_t payload_size;
};

Result<std::vector<Section>> ReadSections(std::span<const std::uint8_t> bytes) {
  static constexpr std::uint8_t kMagic[8] = {0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00};
  if (bytes.size() < 8 || !std::equal(bytes.begin(), bytes.begin() + 4, kMagic)) {
    return InvalidArgument("not a WebAssembly module: the bytes do not start with \\0asm");
  }
  if (!std::equal(bytes.begin() + 4, bytes.begin() + 8, kMagic + 4)) {
    return InvalidArgument("unsupported WebAssembly binary version (only version 1 is supported)");
  }
  std::vector<Section> sections;
  Reader r(bytes.subspan(8), 8);
  while (!r.done()) {
    Section s;
    s.header_start = r.offset();
    auto id = r.Byte();
    if (!id.ok()) return id.status();
    auto size = r.U32();
    if (!size.ok()) return size.status();
    s.id = *id;
    s.payload_start = r.offset();
    s.payload_size = *size;
    if (!r.Bytes(*size).ok()) return r.Malformed(fmt::format("section {} runs past the end", *id));
    sections.push_back(s);
  }
  return sections;
}

// Appends a section: its id, its size and its payload.
void AppendSection(std::vector<std::uint8_t>& out, std::uint8_t id, const std::vector<std::uint8_t>& payload) {
  out.push_back(id);
  AppendUleb128(out, payload.size());
  out.insert(out.end(), payload.begin(), payload.end());
}

}  // namespace

std::string_view ValTypeName(ValType t) {
  switch (t) {
    case ValType::kI32: return "i32";
    case ValType::kI64: return "i64";
    case ValType::kF32: return "f32";
    case ValType::kF64: return "f64";
    case ValType::kV128: return "v128";
    case ValType::kFuncRef: return "funcref";
    case ValType::kExternRef: return "externref";
  }
  return "?";
}

std::string FuncTypeString(const FuncType& t) {
  auto list = [](const std::vector<ValType>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) s += ", ";
      s += ValTypeName(v[i]);
    }
    return s;
  };
  std::string results = t.results.empty() ? "()" : t.results.size() == 1 ? list(t.results)
                                                                         : "(" + list(t.results) + ")";
  return "(" + list(t.params) + ") -> " + results;
}

std::string_view ExternKindName(ExternKind k) {
  switch (k) {
    case ExternKind::kFunc: return "function";
    case ExternKind::kTable: return "table";
    case ExternKind::kMemory: return "memory";
    case ExternKind::kGlobal: return "global";
    case ExternKind::kTag: return "tag";
  }
  return "?";
}

const Export* ModuleInfo::FindExport(std::string_view name) const {
  for (const auto& e : exports) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

Result<ModuleInfo> ReadModuleInfo(std::span<const std::uint8_t> bytes) {
  auto sections = ReadSections(bytes);
  if (!sections.ok()) return sections.status();

  ModuleInfo info;
  std::vector<FuncType>& types = info.types;
  std::vector<std::uint32_t> func_types;  // the function index space: type index of each
  struct RawExport { std::string name; ExternKind kind; std::uint32_t index; };
  std::vector<RawExport> raw_exports;

  for (const Section& s : *sections) {
    Reader r(bytes.subspan(s.payload_start, s.payload_size), s.payload_start);
    switch (s.id) {
      case kSectionType: {
        auto n = r.LimitedCount(kMaxTypes, "types");
        if (!n.ok()) return n.status();
        for (std::uint32_t i = 0; i < *n; ++i) {
          auto form = r.Byte();
          if (!form.ok()) return form.status();
          if (*form != 0x60) return r.Malformed("type entry is not a function type");
          FuncType t;
          for (auto* vec : {&t.params, &t.results}) {
            auto m = vec == &t.params ? r.Count(kMaxFunctionParams, "parameters")
                                      : r.Count(kMaxFunctionResults, "results");
            if (!m.ok()) return m.status();
            for (std::uint32_t j = 0; j < *m; ++j) {
              auto v = ReadValType(r);
              if (!v.ok()) return v.status();
              vec->push_back(*v);
            }
          }
          types.push_back(std::move(t));
        }
        break;
      }
      case kSectionImport: {
        auto n = r.LimitedCount(kMaxImports, "imports");
        if (!n.ok()) return n.status();
        for (std::uint32_t i = 0; i < *n; ++i) {
          Import imp;
          auto mod = r.Name();
          if (!mod.ok()) return mod.status();
          auto name = r.Name();
          if (!name.ok()) return name.status();
          imp.module = std::move(*mod);
          imp.name = std::move(*name);
          auto kind = r.Byte();
          if (!kind.ok()) return kind.status();
          switch (*kind) {
            case 0x00: {
              auto ti = r.U32();
              if (!ti.ok()) return ti.status();
              if (*ti >= types.size()) return r.Malformed("import names an unknown type");
              imp.kind = ExternKind::kFunc;
              imp.type_index = *ti;
              func_types.push_back(*ti);
              break;
            }
            case 0x01: {
              imp.kind = ExternKind::kTable;
              auto t = ReadTableType(r);
              if (!t.ok()) return t.status();
              t->imported = true;
              info.tables.push_back(*t);
              if (info.tables.size() > kMaxTables) return Reader::OverLimit(info.tables.size(), kMaxTables, "tables");
              break;
            }
            case 0x02: {
              imp.kind = ExternKind::kMemory;
              auto l = ReadLimits(r, true);
              if (!l.ok()) return l.status();
              l->imported = true;
              info.memories.push_back(*l);
              break;
            }
            case 0x03: {
              imp.kind = ExternKind::kGlobal;
              if (auto t = ReadValType(r); !t.ok()) return t.status();
              if (auto m = r.Byte(); !m.ok()) return m.status();
              break;
            }
            case 0x04: {
              imp.kind = ExternKind::kTag;
              if (auto a = r.Byte(); !a.ok()) return a.status();
              if (auto t = r.U32(); !t.ok()) return t.status();
              break;
            }
            default: return r.Malformed(fmt::format("unknown import kind 0x{:02x}", *kind));
          }
          info.imports.push_back(std::move(imp));
        }
        break;
      }
      case kSectionFunction: {
        auto n = r.LimitedCount(kMaxFunctions, "functions");
        if (!n.ok()) return n.status();
        if (func_types.size() + *n > kMaxFunctions) {
          return Reader::OverLimit(func_types.size() + *n, kMaxFunctions, "functions (imports included)");
        }
        info.defined_functions += *n;
        for (std::uint32_t i = 0; i < *n; ++i) {
          auto ti = r.U32();
          if (!ti.ok()) return ti.status();
          if (*ti >= types.size()) return r.Malformed("function names an unknown type");
          func_types.push_back(*ti);
        }
        break;
      }
      case kSectionMemory: {
        auto n = r.Count();
        if (!n.ok()) return n.status();
        for (std::uint32_t i = 0; i < *n; ++i) {
          auto l = ReadLimits(r, true);
          if (!l.ok()) return l.status();
          info.memories.push_back(*l);
        }
        break;
      }
      case kSectionTable: {
        auto n = r.LimitedCount(kMaxTables, "tables");
        if (!n.ok()) return n.status();
        if (info.tables.size() + *n > kMaxTables) {
          return Reader::OverLimit(info.tables.size() + *n, kMaxTables, "tables (imports included)");
        }
        for (std::uint32_t i = 0; i < *n; ++i) {
          auto t = ReadTableType(r);
          if (!t.ok()) return t.status();
          info.tables.push_back(*t);
        }
        break;
      }
      case kSectionGlobal: {
        auto n = r.LimitedCount(kMaxGlobals, "globals");
        if (!n.ok()) return n.status();
        info.globals += *n;
        if (info.globals > kMaxGlobals) return Reader::OverLimit(info.globals, kMaxGlobals, "globals");
        for (std::uint32_t i = 0; i < *n; ++i) {
          if (auto t = ReadValType(r); !t.ok()) return t.status();
          if (auto m = r.Byte(); !m.ok()) return m.status();
          if (Status e = SkipConstExpr(r); !e.ok()) return e;
        }
        break;
      }
      case kSectionElement: {
        auto n = r.LimitedCount(kMaxElementSegments, "element segments");
        if (!n.ok()) return n.status();
        info.element_segments += *n;
        for (std::uint32_t i = 0; i < *n; ++i) {
          // flags: bit 0 passive or declarative, bit 1 explicit table (when active) or
          // declarative, bit 2 the entries are expressions rather than function indices.
          auto flags = r.U32();
          if (!flags.ok()) return flags.status();
          if (*flags > 7) return r.Malformed(fmt::format("unknown element segment kind {}", *flags));
          const bool active = (*flags & 1) == 0;
          const bool explicit_table = (*flags & 2) != 0;
          const bool expressions = (*flags & 4) != 0;
          if (active && explicit_table) {
            if (auto t = r.U32(); !t.ok()) return t.status();
          }
          if (active) {
            if (Status e = SkipConstExpr(r); !e.ok()) return e;
          }
          if (!active || explicit_table) {  // an element kind (0x00) or a reference type
            if (auto k = r.Byte(); !k.ok()) return k.status();
          }
          auto m = r.Count();
          if (!m.ok()) return m.status();
          info.element_entries += *m;
          for (std::uint32_t j = 0; j < *m; ++j) {
            Status e = expressions ? SkipConstExpr(r) : r.U32().status();
            if (!e.ok()) return e;
          }
        }
        break;
      }
      case kSectionData: {
        auto n = r.LimitedCount(kMaxDataSegments, "data segments");
        if (!n.ok()) return n.status();
        info.data_segments += *n;
        for (std::uint32_t i = 0; i < *n; ++i) {
          auto flags = r.U32();
          if (!flags.ok()) return flags.status();
          if (*flags > 2) return r.Malformed(fmt::format("unknown data segment kind {}", *flags));
          if (*flags == 2) {
            if (auto m = r.U32(); !m.ok()) return m.status();
          }
          if (*flags != 1) {
            if (Status e = SkipConstExpr(r); !e.ok()) return e;
          }
          auto size = r.U32();
          if (!size.ok()) return size.status();
          if (auto b = r.Bytes(*size); !b.ok()) return b.status();
          info.data_bytes += *size;
        }
        break;
      }
      case kSectionCode: {
        auto n = r.Count();
        if (!n.ok()) return n.status();
        if (*n != info.defined_functions) {
          return r.Malformed(fmt::format("{} function bodies for {} functions", *n, info.defined_functions));
        }
        const std::uint32_t first = static_cast<std::uint32_t>(func_types.size()) - info.defined_functions;
        for (std::uint32_t i = 0; i < *n; ++i) {
          const std::uint32_t function = first + i;
          auto size = r.U32();
          if (!size.ok()) return size.status();
          if (*size > kMaxFunctionBodyBytes) {
            return InvalidArgument(fmt::format(
                "the module's function {} has a body of {} bytes, over the limit of {} bytes per function "
                "(docs/abi.md, \"Limits\")", function, *size, kMaxFunctionBodyBytes));
          }
          if (*size > info.largest_body.value) info.largest_body = {*size, function};
          info.code_bytes += *size;
          auto body = r.Bytes(*size);
          if (!body.ok()) return body.status();
          Reader b(*body, r.offset() - *size);
          auto groups = b.Count();
          if (!groups.ok()) return groups.status();
          std::uint64_t locals = 0;
          for (std::uint32_t g = 0; g < *groups; ++g) {
            auto count = b.U32();
            if (!count.ok()) return count.status();
            locals += *count;
            if (locals > kMaxFunctionLocals) {
              return InvalidArgument(fmt::format(
                  "the module's function {} declares {} or more locals, over the limit of {} locals per function "
                  "(docs/abi.md, \"Limits\")", function, locals, kMaxFunctionLocals));
            }
            if (auto t = ReadValType(b); !t.ok()) return t.status();
          }
          if (locals > info.most_locals.value) info.most_locals = {locals, function};
        }
        break;
      }
      case kSectionTag: {  // exception handling's tags: V8 makes a tag object per instance
        auto n = r.LimitedCount(kMaxTags, "exception tags");
        if (!n.ok()) return n.status();
        break;
      }
      case kSectionExport: {
        auto n = r.LimitedCount(kMaxExports, "exports");
        if (!n.ok()) return n.status();
        for (std::uint32_t i = 0; i < *n; ++i) {
          auto name = r.Name();
          if (!name.ok()) return name.status();
          auto kind = r.Byte();
          if (!kind.ok()) return kind.status();
          if (*kind > 4) return r.Malformed(fmt::format("unknown export kind 0x{:02x}", *kind));
          auto index = r.U32();
          if (!index.ok()) return index.status();
          raw_exports.push_back({std::move(*name), static_cast<ExternKind>(*kind), *index});
        }
        break;
      }
      default:
        break;  // custom sections, start, data count
    }
  }
  for (auto& e : raw_exports) {
    Export ex{std::move(e.name), e.kind, {}};
    if (e.kind == ExternKind::kFunc) {
      if (e.index >= func_types.size()) {
        return InvalidArgument(fmt::format(
            "not a valid WebAssembly module: export \"{}\" names function {} which does not exist",
            ex.name, e.index));
      }
      ex.type_index = func_types[e.index];
    }
    info.exports.push_back(std::move(ex));
  }
  return info;
}

Result<std::vector<std::uint8_t>> WithImportedMemory(std::span<const std::uint8_t> bytes,
                                                     std::uint64_t max_pages) {
  auto sections = ReadSections(bytes);
  if (!sections.ok()) return sections.status();
  const Section* mem = nullptr;
  const Section* imports = nullptr;
  const Section* first_after_imports = nullptr;  // where a new import section goes
  for (const Section& s : *sections) {
    if (s.id == kSectionMemory) mem = &s;
    if (s.id == kSectionImport) imports = &s;
    if (s.id != 0 && s.id > kSectionImport && first_after_imports == nullptr) first_after_imports = &s;
  }
  if (mem == nullptr) return InvalidArgument("the module defines no memory");
  Reader r(bytes.subspan(mem->payload_start, mem->payload_size), mem->payload_start);
  auto n = r.Count();
  if (!n.ok()) return n.status();
  if (*n != 1) return InvalidArgument("the module must define exactly one memory");
  auto lim = ReadLimits(r, true);
  if (!lim.ok()) return lim.status();
  if (lim->min_pages > max_pages) {
    return InvalidArgument(fmt::format("the module's initial memory ({} pages) exceeds the maximum of {} pages",
                                       lim->min_pages, max_pages));
  }
  std::vector<std::uint8_t> entry;
  AppendUleb128(entry, kMemoryImportModule.size());
  entry.insert(entry.end(), kMemoryImportModule.begin(), kMemoryImportModule.end());
  AppendUleb128(entry, kMemoryImportName.size());
  entry.insert(entry.end(), kMemoryImportName.begin(), kMemoryImportName.end());
  entry.push_back(static_cast<std::uint8_t>(ExternKind::kMemory));
  entry.push_back(0x01);  // limits with a maximum
  AppendUleb128(entry, lim->min_pages);
  AppendUleb128(entry, max_pages);

  std::vector<std::uint8_t> import_payload;
  if (imports != nullptr) {
    Reader c(bytes.subspan(imports->payload_start, imports->payload_size), imports->payload_start);
    auto count = c.Count();
    if (!count.ok()) return count.status();
    const std::size_t entries_start = c.offset();
    for (std::uint32_t i = 0; i < *count; ++i) {
      auto module = c.Name();
      if (!module.ok()) return module.status();
      auto name = c.Name();
      if (!name.ok()) return name.status();
      if (*module == kMemoryImportModule) {
        return InvalidArgument(fmt::format("the module imports from \"{}\", a name the engine reserves", *module));
      }
      auto kind = c.Byte();
      if (!kind.ok()) return kind.status();
      if (*kind == static_cast<std::uint8_t>(ExternKind::kMemory)) {
        return InvalidArgument("the module imports a memory");
      }
      // Skip the entry's description (a type index, a table type, a memory's limits or a
      // global type) by reading it.
      switch (static_cast<ExternKind>(*kind)) {
        case ExternKind::kFunc:
          if (auto index = c.U32(); !index.ok()) return index.status();
          break;
        case ExternKind::kTable:
          if (auto t = ReadTableType(c); !t.ok()) return t.status();
          break;
        case ExternKind::kGlobal: {
          if (auto type = c.Byte(); !type.ok()) return type.status();
          if (auto mut = c.Byte(); !mut.ok()) return mut.status();
          break;
        }
        default:
          return c.Malformed(fmt::format("import kind {}", *kind));
      }
    }
    if (!c.done()) return c.Malformed("bytes after the last import");
    // The existing entries are kept byte for byte; the count goes up and ours follows them.
    AppendUleb128(import_payload, std::uint64_t{*count} + 1);
    import_payload.insert(import_payload.end(), bytes.begin() + entries_start,
                          bytes.begin() + imports->payload_start + imports->payload_size);
  } else {
    AppendUleb128(import_payload, 1);
  }
  import_payload.insert(import_payload.end(), entry.begin(), entry.end());
  std::vector<std::uint8_t> import_section;
  AppendSection(import_section, kSectionImport, import_payload);

  // Section by section: the import section replaced (or inserted before the first section
  // that follows it), the memory section left out, everything else byte for byte.
  std::vector<std::uint8_t> out(bytes.begin(), bytes.begin() + 8);
  for (const Section& s : *sections) {
    if (imports == nullptr && &s == first_after_imports) {
      out.insert(out.end(), import_section.begin(), import_section.end());
    }
    if (&s == mem) continue;
    if (&s == imports) {
      out.insert(out.end(), import_section.begin(), import_section.end());
      continue;
    }
    out.insert(out.end(), bytes.begin() + s.header_start, bytes.begin() + s.payload_start + s.payload_size);
  }
  return out;
}

Result<std::vector<std::uint8_t>> WithTableMaximums(std::span<const std::uint8_t> bytes,
                                                    std::span<const std::uint64_t> max) {
  auto sections = ReadSections(bytes);
  if (!sections.ok()) return sections.status();
  const Section* table = nullptr;
  for (const Section& s : *sections) {
    if (s.id == kSectionTable) table = &s;
  }
  if (table == nullptr) return InvalidArgument("the module defines no table");
  Reader r(bytes.subspan(table->payload_start, table->payload_size), table->payload_start);
  auto n = r.Count();
  if (!n.ok()) return n.status();
  if (*n != max.size()) {
    return InvalidArgument(fmt::format("the module defines {} tables, not {}", *n, max.size()));
  }
  std::vector<std::uint8_t> payload;
  AppendUleb128(payload, *n);
  for (std::uint32_t i = 0; i < *n; ++i) {
    auto t = ReadTableType(r);
    if (!t.ok()) return t.status();
    if (max[i] < t->min || max[i] > 0xffff'ffffu) {
      return InvalidArgument(fmt::format("table {} cannot have the maximum {} (its minimum is {})", i, max[i], t->min));
    }
    payload.push_back(t->element == ValType::kFuncRef ? 0x70 : 0x6f);
    payload.push_back(0x01);
    AppendUleb128(payload, t->min);
    AppendUleb128(payload, max[i]);
  }
  if (!r.done()) return r.Malformed("bytes after the last table");

  std::vector<std::uint8_t> out(bytes.begin(), bytes.begin() + table->header_start);
  AppendSection(out, kSectionTable, payload);
  out.insert(out.end(), bytes.begin() + table->payload_start + table->payload_size, bytes.end());
  return out;
}

Result<std::vector<std::uint8_t>> WithTableExports(std::span<const std::uint8_t> bytes,
                                                   std::span<const TableExport> exports) {
  auto sections = ReadSections(bytes);
  if (!sections.ok()) return sections.status();
  const Section* section = nullptr;
  for (const Section& s : *sections) {
    if (s.id == kSectionExport) section = &s;
  }
  if (section == nullptr) return InvalidArgument("the module has no export section");
  Reader r(bytes.subspan(section->payload_start, section->payload_size), section->payload_start);
  auto n = r.Count();
  if (!n.ok()) return n.status();
  for (std::uint32_t i = 0; i < *n; ++i) {
    auto name = r.Name();
    if (!name.ok()) return name.status();
    for (const TableExport& e : exports) {
      if (*name == e.name) return InvalidArgument(fmt::format("the module already exports \"{}\"", e.name));
    }
    if (auto kind = r.Byte(); !kind.ok()) return kind.status();
    if (auto index = r.U32(); !index.ok()) return index.status();
  }
  if (!r.done()) return r.Malformed("bytes after the last export");
  // The existing entries are kept byte for byte; the count goes up and ours follow them.
  std::size_t count_bytes = 0;
  {
    Reader c(bytes.subspan(section->payload_start, section->payload_size), section->payload_start);
    if (auto again = c.Count(); !again.ok()) return again.status();
    count_bytes = c.offset() - section->payload_start;
  }
  std::vector<std::uint8_t> payload;
  AppendUleb128(payload, std::uint64_t{*n} + exports.size());
  payload.insert(payload.end(), bytes.begin() + section->payload_start + count_bytes,
                 bytes.begin() + section->payload_start + section->payload_size);
  for (const TableExport& e : exports) {
    AppendUleb128(payload, e.name.size());
    payload.insert(payload.end(), e.name.begin(), e.name.end());
    payload.push_back(static_cast<std::uint8_t>(ExternKind::kTable));
    AppendUleb128(payload, e.table_index);
  }
  std::vector<std::uint8_t> out(bytes.begin(), bytes.begin() + section->header_start);
  AppendSection(out, kSectionExport, payload);
  out.insert(out.end(), bytes.begin() + section->payload_start + section->payload_size, bytes.end());
  return out;
}

void AppendUleb128(std::vector<std::uint8_t>& out, std::uint64_t v) {
  do {
    std::uint8_t b = v & 0x7f;
    v >>= 7;
    if (v != 0) b |= 0x80;
    out.push_back(b);
  } while (v != 0);
}

}  // namespace wk::engine
