// The body of a structure file read without expat, in the form writers give it: tags and
// white space. Anything else, or anything it cannot tell is well-formed, stops it (false);
// the caller then has expat read those bytes, which decides and names the error.
#include <bit>
#include <cstring>
#include <optional>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "formats/structfile/checker.hpp"
#include "formats/structfile/schema.hpp"

namespace hpc::structfile {
namespace {

bool is_letter(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
// Names of a few letters compared in place (std::string_view's == calls memcmp).
bool same(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}
// The attribute names of the DTD: lower-case letters and '-'.
bool is_attribute_char(unsigned char c) { return (c >= 'a' && c <= 'z') || c == '-'; }

// An XML character (expat reads DEL and the C1 controls as such too).
bool is_char(uint32_t cp) {
  return cp == 0x9 || cp == 0xa || cp == 0xd || (cp >= 0x20 && cp < 0xd800) || (cp >= 0xe000 && cp <= 0xfffd) ||
         (cp >= 0x10000 && cp <= 0x10ffff);
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | cp >> 6);
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | cp >> 12);
    out += char(0x80 | (cp >> 6 & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | cp >> 18);
    out += char(0x80 | (cp >> 12 & 0x3f));
    out += char(0x80 | (cp >> 6 & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

// The length of the UTF-8 sequence of an XML character at s[0] (a byte >= 0x80), within n
// bytes; 0 where it is not one (invalid, overlong, a surrogate, U+FFFE or U+FFFF).
size_t utf8_char(const unsigned char* s, size_t n) {
  auto cont = [&](size_t i) { return i < n && (s[i] & 0xc0) == 0x80; };
  const unsigned char c = s[0];
  if (c >= 0xc2 && c <= 0xdf) {
    if (!cont(1)) return 0;
    return 2;  // 0xc2 and above: not overlong
  }
  if (c >= 0xe0 && c <= 0xef) {
    if (!cont(1) || !cont(2)) return 0;
    const uint32_t cp = uint32_t(c & 0x0f) << 12 | uint32_t(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
    return cp >= 0x800 && is_char(cp) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    const uint32_t cp =
        uint32_t(c & 0x07) << 18 | uint32_t(s[1] & 0x3f) << 12 | uint32_t(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
    return cp >= 0x10000 && cp <= 0x10ffff ? 4 : 0;
  }
  return 0;
}

// The reference at s (after its '&', up to its ';', exclusive) as a character; 0: not one
// this scanner reads.
uint32_t reference(std::string_view r) {
  switch (r.size()) {
    case 2:
      if (r[1] == 't' && (r[0] == 'l' || r[0] == 'g')) return r[0] == 'l' ? '<' : '>';
      break;
    case 3:
      if (r[0] == 'a' && r[1] == 'm' && r[2] == 'p') return '&';
      break;
    case 4:
      if (r == "quot") return '"';
      if (r == "apos") return '\'';
      break;
  }
  if (r.size() < 2 || r[0] != '#') return 0;
  uint32_t cp = 0;
  if (r[1] == 'x') {
    if (r.size() < 3 || r.size() > 2 + 6) return 0;
    for (char c : r.substr(2)) {
      const int d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
      if (d < 0) return 0;
      cp = cp << 4 | uint32_t(d);
    }
  } else {
    if (r.size() > 1 + 7) return 0;
    for (char c : r.substr(1)) {
      if (c < '0' || c > '9') return 0;
      cp = cp * 10 + uint32_t(c - '0');
    }
  }
  return is_char(cp) ? cp : 0;
}

}  // namespace

bool Scanner::run(size_t from, size_t to) {
  const char* t = text_.data();
  for (size_t at = from; at < to;) {
    const char c = t[at];
    if (is_xml_space(c)) {
      ++at;
      continue;
    }
    if (c != '<' || at + 1 >= to) return false;  // text, or a tag cut off
    const char c1 = t[at + 1];
    if (c1 == '/') {
      if (!end_tag(at, to)) return false;
    } else if (!is_letter(static_cast<unsigned char>(c1)) || !start_tag(at, to)) {
      return false;  // comments, instructions, CDATA, other names: expat's
    }
  }
  return true;
}

bool Scanner::start_tag(size_t& at, size_t to) {
  if (checker_.root_done() && checker_.depth() == 0) return false;  // after the root's end
  const char* t = text_.data();
  size_t q = at + 1;
  while (q < to && is_letter(static_cast<unsigned char>(t[q]))) ++q;
  const std::string_view tag(t + at + 1, q - at - 1);
  const std::optional<Kind> kind = schema::kind_of(tag);
  const bool text = !kind || checker_.visitor().wants_text(*kind);
  attributes_.clear();
  decoded_.clear();
  scratch_.clear();
  bool empty = false;
  for (;;) {
    bool space = false;
    while (q < to && is_xml_space(t[q])) {
      ++q;
      space = true;
    }
    if (q >= to) return false;
    if (t[q] == '>') {
      ++q;
      break;
    }
    if (t[q] == '/') {
      if (q + 1 >= to || t[q + 1] != '>') return false;
      q += 2;
      empty = true;
      break;
    }
    if (!space) return false;  // attributes are set apart by white space
    const size_t name = q;
    while (q < to && is_attribute_char(static_cast<unsigned char>(t[q]))) ++q;
    if (q == name) return false;
    const std::string_view key(t + name, q - name);
    while (q < to && is_xml_space(t[q])) ++q;
    if (q >= to || t[q] != '=') return false;
    ++q;
    while (q < to && is_xml_space(t[q])) ++q;
    if (q >= to || (t[q] != '"' && t[q] != '\'')) return false;
    const char quote = t[q++];
    // Text the visitor does not take is checked, not read.
    const bool decode = text || !(key.size() == 1 ? key[0] == 'n' || key[0] == 'f' || key[0] == 'd'
                                                   : key.size() == 2 && key[0] == 'l' && key[1] == 'n');
    size_t end = 0;
    std::pair<size_t, size_t> where{std::string::npos, 0};
    if (!value(q, to, quote, decode, &end, &where)) return false;
    for (const Checker::Attribute& a : attributes_)
      if (same(a.name, key)) return false;  // a duplicate
    attributes_.push_back({key, std::string_view(t + q, end - q)});
    decoded_.push_back(where);
    q = end + 1;
  }
  // Values with references point into the scratch, which is complete now.
  for (size_t i = 0; i < attributes_.size(); ++i)
    if (decoded_[i].first != std::string::npos)
      attributes_[i].value = std::string_view(scratch_).substr(decoded_[i].first, decoded_[i].second);
  if (!kind || !checker_.start(*kind, tag, attributes_, at, q - at).ok()) return false;
  if (empty && !checker_.end(at, 0).ok()) return false;
  at = q;
  return true;
}

bool Scanner::end_tag(size_t& at, size_t to) {
  if (checker_.depth() == 0) return false;
  const char* t = text_.data();
  size_t q = at + 2;
  while (q < to && is_letter(static_cast<unsigned char>(t[q]))) ++q;
  if (!same(std::string_view(t + at + 2, q - at - 2), tag_name(checker_.open_kind()))) return false;
  while (q < to && is_xml_space(t[q])) ++q;
  if (q >= to || t[q] != '>') return false;
  ++q;
  if (!checker_.end(at, q - at).ok()) return false;
  at = q;
  return true;
}

bool Scanner::value(size_t from, size_t to, char quote, bool decode, size_t* end, std::pair<size_t, size_t>* where) {
  const auto* s = reinterpret_cast<const unsigned char*>(text_.data());
  size_t copied = from;  // with references: the bytes up to here are in the scratch
  size_t i = from;
  for (;;) {
#if defined(__SSE2__)
    // 16 bytes at a time to the next that is not plain ASCII (bytes below 0x20 and from 0x80
    // on are below 0x20 as signed bytes), '<', '&' or the quote.
    const __m128i q = _mm_set1_epi8(quote), lt = _mm_set1_epi8('<'), amp = _mm_set1_epi8('&'),
                  space = _mm_set1_epi8(0x20);
    while (i + 16 <= to) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      const __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, lt)),
                                           _mm_or_si128(_mm_cmpeq_epi8(v, amp), _mm_cmplt_epi8(v, space)));
      const unsigned mask = unsigned(_mm_movemask_epi8(special));
      if (mask != 0) {
        i += size_t(std::countr_zero(mask));
        break;
      }
      i += 16;
    }
#endif
    while (i < to && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '<' && s[i] != '&' && s[i] != quote) ++i;
    if (i >= to) return false;  // no end
    const unsigned char c = s[i];
    if (c == static_cast<unsigned char>(quote)) break;
    if (c >= 0x80) {
      const size_t n = utf8_char(s + i, to - i);
      if (n == 0) return false;
      i += n;
      continue;
    }
    if (c != '&') return false;  // '<', control characters (and literal white space: normalized)
    size_t e = i + 1;  // the ';' within 10 bytes (a short loop: memchr's call cost more)
    for (const size_t last = std::min(to, i + 11); e < last && s[e] != ';';) ++e;
    if (e >= to || s[e] != ';') return false;
    const uint32_t cp = reference(std::string_view(text_.data() + i + 1, e - i - 1));
    if (cp == 0) return false;
    if (decode) {
      if (where->first == std::string::npos) where->first = scratch_.size();
      scratch_.append(text_.data() + copied, i - copied);
      append_utf8(scratch_, cp);
      copied = e + 1;
    }
    i = e + 1;
  }
  *end = i;
  if (where->first != std::string::npos) {
    scratch_.append(text_.data() + copied, i - copied);
    where->second = scratch_.size() - where->first;
  }
  return true;
}

}  // namespace hpc::structfile
