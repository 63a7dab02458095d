#include "graph/onnx_wire.h"

#include <algorithm>

#include "graph/error.h"

namespace kiln::onnx_wire {
namespace {

// Field numbers (onnx.proto).
constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphNode = 1, kGraphInitializer = 5;
constexpr uint32_t kNodeAttribute = 5;
constexpr uint32_t kAttributeTensor = 5;
constexpr uint32_t kTensorFloatData = 4, kTensorRawData = 9;

// Wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kBytes = 2, kGroupStart = 3, kGroupEnd = 4,
                   kFixed32 = 5;

// Protobuf's default recursion limit; only nested unknown groups recurse here.
constexpr int kMaxGroupDepth = 100;

[[noreturn]] void bad(const std::string& why, uint64_t at) {
  fail(Code::invalid_model, "the model is not a valid ONNX protobuf (truncated or corrupt file: " +
                                why + " at byte " + std::to_string(at) + ")");
}

size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) v >>= 7, ++n;
  return n;
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}

// One field of a message body. For wire type `bytes`, [body, end) is the payload and
// [len_at, body) its length prefix.
struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t len_at = 0, body = 0, end = 0;
  uint64_t size() const { return end - body; }
};

class Walker {
 public:
  Walker(const uint8_t* d, uint64_t size, uint64_t min_payload, Stripped& out)
      : d_(d), size_(size), min_(std::max<uint64_t>(min_payload, 1)), out_(out) {}

  void run() {
    uint64_t new_len = model(0, size_);
    if (edits_.empty()) {
      out_.unchanged = true;
      return;
    }
    std::sort(edits_.begin(), edits_.end(),
              [](const Edit& a, const Edit& b) { return a.begin < b.begin; });
    std::string& s = out_.bytes;
    s.reserve(size_t(new_len));
    uint64_t at = 0;
    for (const Edit& e : edits_) {
      s.append(reinterpret_cast<const char*>(d_ + at), size_t(e.begin - at));
      put_varint(s, e.value);
      at = e.end;
    }
    s.append(reinterpret_cast<const char*>(d_ + at), size_t(size_ - at));
    if (s.size() != new_len) fail(Code::internal, "onnx_wire: stripped size mismatch");
  }

 private:
  // Replace [begin, end) of the original with the varint encoding of `value`.
  struct Edit {
    uint64_t begin, end, value;
  };

  uint64_t varint(uint64_t& pos, uint64_t end) const {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos >= end) bad("truncated varint", pos);
      const uint8_t b = d_[pos++];
      v |= uint64_t(b & 0x7f) << shift;  // a 10th byte's high bits are dropped, as protobuf does
      if (!(b & 0x80)) return v;
    }
    bad("varint longer than 10 bytes", pos);
  }

  // Reads the field starting at `pos` (< end) and moves `pos` past it.
  Field next(uint64_t& pos, uint64_t end, int depth = 0) const {
    const uint64_t at = pos;
    const uint64_t tag = varint(pos, end);
    if (tag > 0xffffffffu || (tag >> 3) == 0) bad("invalid field tag", at);
    Field f;
    f.number = uint32_t(tag >> 3);
    f.wire = uint32_t(tag & 7);
    switch (f.wire) {
      case kVarint:
        varint(pos, end);
        break;
      case kFixed64:
        skip(pos, end, 8);
        break;
      case kFixed32:
        skip(pos, end, 4);
        break;
      case kBytes: {
        f.len_at = pos;
        const uint64_t len = varint(pos, end);
        if (len > end - pos) bad("length runs past the end of its message", f.len_at);
        f.body = pos;
        f.end = pos + len;
        pos = f.end;
        break;
      }
      case kGroupStart: {
        // A (deprecated) group: fields up to the matching end tag. Unknown to ONNX, but
        // protobuf skips it, so must we.
        if (depth >= kMaxGroupDepth) bad("groups nested too deeply", at);
        for (;;) {
          if (pos >= end) bad("unterminated group", at);
          const uint64_t inner_at = pos;
          Field g = next(pos, end, depth + 1);
          if (g.wire == kGroupEnd) {
            if (g.number != f.number) bad("mismatched group end", inner_at);
            break;
          }
        }
        break;
      }
      case kGroupEnd:
        if (depth == 0) bad("unexpected group end", at);
        break;
      default:
        bad("invalid wire type " + std::to_string(f.wire), at);
    }
    return f;
  }

  void skip(uint64_t& pos, uint64_t end, uint64_t n) const {
    if (n > end - pos) bad("truncated fixed-size field", pos);
    pos += n;
  }

  // The submessage field `f` now has `new_len` body bytes: rewrites its length prefix and
  // returns how many bytes the field shrank by.
  uint64_t resize(const Field& f, uint64_t new_len) {
    if (new_len == f.size()) return 0;
    edits_.push_back({f.len_at, f.body, new_len});
    return (f.end - f.len_at) - (varint_size(new_len) + new_len);
  }

  // Cuts the payload of bytes field `f`: it becomes an empty field (tag, length 0).
  uint64_t cut(const Field& f, Range& r) {
    r = {f.body, f.size(), true};
    out_.cut_bytes += f.size();
    edits_.push_back({f.len_at, f.end, 0});
    return (f.end - f.len_at) - 1;
  }

  // Each walker returns the new body length of the message in [b, e).
  uint64_t model(uint64_t b, uint64_t e) {
    uint64_t saved = 0;
    for (uint64_t pos = b; pos < e;) {
      Field f = next(pos, e);
      if (f.number == kModelGraph && f.wire == kBytes) saved += resize(f, graph(f.body, f.end));
    }
    return (e - b) - saved;
  }

  uint64_t graph(uint64_t b, uint64_t e) {
    uint64_t saved = 0;
    for (uint64_t pos = b; pos < e;) {
      Field f = next(pos, e);
      if (f.wire != kBytes) continue;
      if (f.number == kGraphInitializer) {
        TensorCut c;
        saved += resize(f, tensor(f.body, f.end, c));
        out_.initializers.push_back(c);
      } else if (f.number == kGraphNode) {
        saved += resize(f, node(f.body, f.end, nodes_++));
      }
    }
    return (e - b) - saved;
  }

  uint64_t node(uint64_t b, uint64_t e, int64_t node_index) {
    uint64_t saved = 0;
    int64_t attrs = 0;
    for (uint64_t pos = b; pos < e;) {
      Field f = next(pos, e);
      if (f.number == kNodeAttribute && f.wire == kBytes)
        saved += resize(f, attribute(f.body, f.end, node_index, attrs++));
    }
    return (e - b) - saved;
  }

  uint64_t attribute(uint64_t b, uint64_t e, int64_t node_index, int64_t attr_index) {
    // AttributeProto.t is a singular message: given twice, protobuf merges the two tensors,
    // so a payload cut from one of them could not be matched up. Cut only a lone `t`.
    Field t;
    int count = 0;
    for (uint64_t pos = b; pos < e;) {
      Field f = next(pos, e);
      if (f.number == kAttributeTensor) t = f, ++count;
    }
    if (count != 1 || t.wire != kBytes) return e - b;
    TensorCut c;
    const uint64_t saved = resize(t, tensor(t.body, t.end, c));
    if (c.any()) out_.attributes[{node_index, attr_index}] = c;
    return (e - b) - saved;
  }

  uint64_t tensor(uint64_t b, uint64_t e, TensorCut& c) {
    // raw_data given twice keeps the last; float_data given twice (or unpacked) appends: only
    // a lone, length-delimited occurrence is cut.
    Field raw, floats;
    int raws = 0, float_fields = 0;
    for (uint64_t pos = b; pos < e;) {
      Field f = next(pos, e);
      if (f.number == kTensorRawData)
        raw = f, ++raws;
      else if (f.number == kTensorFloatData)
        floats = f, ++float_fields;
    }
    uint64_t saved = 0;
    if (raws == 1 && raw.wire == kBytes && raw.size() >= min_) saved += cut(raw, c.raw);
    // A packed run that is not whole floats is left for protobuf to reject.
    if (float_fields == 1 && floats.wire == kBytes && floats.size() >= min_ &&
        floats.size() % 4 == 0)
      saved += cut(floats, c.floats);
    return (e - b) - saved;
  }

  const uint8_t* d_;
  uint64_t size_, min_;
  Stripped& out_;
  std::vector<Edit> edits_;
  int64_t nodes_ = 0;
};

}  // namespace

Stripped strip_payloads(const uint8_t* data, size_t size, uint64_t min_payload) {
  Stripped s;
  Walker(data, size, min_payload, s).run();
  return s;
}

}  // namespace kiln::onnx_wire
