// Exhaustive checks of the float formats: every f16, bf16, e4m3 and e2m1 bit pattern decoded, and
// rounding of every representable value, every midpoint between neighbours and the floats just
// beside each midpoint, against an independent reference: a float64 decode from the format's
// definition, nearest-value search over the sorted table (ties to the even code), and the
// ml_dtypes decode table (python/st_interop.py dtypes-table, from the setup script's venv).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <vector>

#include <unistd.h>

#include "core/dtype.h"

namespace avdit {
namespace {

// The format's definition in float64: sign, exponent field, mantissa field.
double decode_definition(uint32_t bits, int ebits, int mbits, int bias, bool ieee_special, bool fn_nan) {
  const uint32_t sign = (bits >> (ebits + mbits)) & 1u;
  const uint32_t e = (bits >> mbits) & ((1u << ebits) - 1);
  const uint32_t m = bits & ((1u << mbits) - 1);
  double v;
  if (ieee_special && e == (1u << ebits) - 1) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (fn_nan && e == (1u << ebits) - 1 && m == (1u << mbits) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias - mbits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -mbits), static_cast<int>(e) - bias);
  }
  return sign ? -v : v;
}

struct Format {
  const char* name;
  int bits, ebits, mbits, bias;
  bool ieee_special, fn_nan;
  float (*decode)(uint32_t);
  uint32_t (*encode)(float);
  double max_finite;
  bool saturates;  // overflow goes to the max finite (else to infinity)
};

const Format kF16{"f16", 16, 5, 10, 15, true, false, [](uint32_t b) { return f16_to_f32(static_cast<uint16_t>(b)); },
                  [](float x) { return static_cast<uint32_t>(f32_to_f16(x)); }, 65504.0, false};
const Format kBF16{"bf16", 16, 8, 7, 127, true, false, [](uint32_t b) { return bf16_to_f32(static_cast<uint16_t>(b)); },
                   [](float x) { return static_cast<uint32_t>(f32_to_bf16(x)); }, 3.3895313892515355e38, false};
const Format kE4M3{"e4m3", 8, 4, 3, 7, false, true, [](uint32_t b) { return e4m3_to_f32(static_cast<uint8_t>(b)); },
                   [](float x) { return static_cast<uint32_t>(f32_to_e4m3(x, true)); }, 448.0, true};
const Format kE2M1{"e2m1", 4, 2, 1, 1, false, false, [](uint32_t b) { return e2m1_to_f32(static_cast<uint8_t>(b)); },
                   [](float x) { return static_cast<uint32_t>(f32_to_e2m1(x)); }, 6.0, true};

void check_decode_all(const Format& f) {
  for (uint32_t b = 0; b < (1u << f.bits); ++b) {
    const double want = decode_definition(b, f.ebits, f.mbits, f.bias, f.ieee_special, f.fn_nan);
    const float got = f.decode(b);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << f.name << " pattern " << b;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(static_cast<float>(want)))
          << f.name << " pattern " << b << " want " << want << " got " << got;
    }
  }
}

// Independent encoder: the nearest finite value of the format by search; ties go to the code
// with an even mantissa; beyond the largest finite value by at least half an ulp, overflow.
uint32_t encode_by_search(const Format& f, double x, const std::vector<std::pair<double, uint32_t>>& sorted_pos) {
  const uint32_t sign_bit = 1u << (f.ebits + f.mbits);
  const uint32_t sign = std::signbit(x) ? sign_bit : 0;
  const double a = std::fabs(x);
  const double top = sorted_pos.back().first;
  const double below_top = sorted_pos[sorted_pos.size() - 2].first;
  const double overflow_at = top + (top - below_top) / 2;
  if (a >= overflow_at) {
    if (f.saturates) return sign | sorted_pos.back().second;
    return sign | (((1u << f.ebits) - 1) << f.mbits);  // infinity
  }
  auto it = std::lower_bound(sorted_pos.begin(), sorted_pos.end(), std::make_pair(a, 0u));
  if (it == sorted_pos.end()) return sign | sorted_pos.back().second;
  if (it->first == a) return sign | it->second;
  auto lo = it - 1;
  const double dlo = a - lo->first, dhi = it->first - a;
  if (dlo < dhi) return sign | lo->second;
  if (dhi < dlo) return sign | it->second;
  return sign | ((lo->second & 1u) == 0 ? lo->second : it->second);
}

void check_encode(const Format& f) {
  std::vector<std::pair<double, uint32_t>> pos;  // every finite non-negative value and its code
  const uint32_t sign_bit = 1u << (f.ebits + f.mbits);
  for (uint32_t b = 0; b < sign_bit; ++b) {
    const double v = decode_definition(b, f.ebits, f.mbits, f.bias, f.ieee_special, f.fn_nan);
    if (std::isfinite(v)) pos.emplace_back(v, b);
  }
  std::sort(pos.begin(), pos.end());
  std::vector<float> probes;
  for (size_t i = 0; i < pos.size(); ++i) {
    const float v = static_cast<float>(pos[i].first);
    probes.push_back(v);
    const double next = i + 1 < pos.size() ? pos[i + 1].first : pos[i].first * 2;
    const double mid = (pos[i].first + next) / 2;
    const float midf = static_cast<float>(mid);
    if (static_cast<double>(midf) == mid) {  // the midpoint is a float: probe it and both sides
      probes.push_back(midf);
      probes.push_back(std::nextafter(midf, 0.f));
      probes.push_back(std::nextafter(midf, std::numeric_limits<float>::infinity()));
    }
  }
  std::mt19937 rng(1234);
  for (int i = 0; i < 200000; ++i) {
    const float r = std::ldexp(std::uniform_real_distribution<float>(1.f, 2.f)(rng),
                               std::uniform_int_distribution<int>(-30, 20)(rng));
    probes.push_back(r);
  }
  probes.push_back(std::numeric_limits<float>::denorm_min());
  probes.push_back(std::numeric_limits<float>::max());
  for (const float p : probes)
    for (const float x : {p, -p}) {
      const uint32_t want = encode_by_search(f, x, pos);
      const uint32_t got = f.encode(x);
      // Signed zero: both codes for zero must keep the sign.
      ASSERT_EQ(got, want) << f.name << " encoding " << x;
    }
}

TEST(DType, DecodeEveryF16Pattern) { check_decode_all(kF16); }
TEST(DType, DecodeEveryBF16Pattern) { check_decode_all(kBF16); }
TEST(DType, DecodeEveryE4M3Pattern) { check_decode_all(kE4M3); }
TEST(DType, DecodeEveryE2M1Pattern) { check_decode_all(kE2M1); }

TEST(DType, EncodeF16RoundsToNearestEven) { check_encode(kF16); }
TEST(DType, EncodeBF16RoundsToNearestEven) { check_encode(kBF16); }
TEST(DType, EncodeE4M3RoundsToNearestEvenAndSaturates) { check_encode(kE4M3); }
TEST(DType, EncodeE2M1RoundsToNearestEvenAndSaturates) { check_encode(kE2M1); }

TEST(DType, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(f32_to_f16(inf), 0x7c00);
  EXPECT_EQ(f32_to_f16(-inf), 0xfc00);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(nan))));
  EXPECT_EQ(f32_to_bf16(-inf), 0xff80);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(nan))));
  EXPECT_EQ(f32_to_e4m3(nan), 0x7f);
  EXPECT_EQ(f32_to_e4m3(inf, true), 0x7e);   // saturating: +448
  EXPECT_EQ(f32_to_e4m3(inf, false), 0x7f);  // non-saturating: NaN (no infinity in e4m3)
  EXPECT_EQ(f32_to_e4m3(500.f, false), 0x7f);
  EXPECT_EQ(f32_to_e2m1(nan), 0x7);
  EXPECT_EQ(f32_to_e2m1(-100.f), 0xf);
  // Every f32 that bf16 cannot hold but is a NaN keeps being a NaN (no rounding into Inf).
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::bit_cast<float>(0x7f800001u)))));
}

TEST(DType, ArrayConvertMatchesScalar) {
  std::vector<float> x(1000);
  std::mt19937 rng(7);
  for (auto& v : x) v = std::normal_distribution<float>(0.f, 100.f)(rng);
  std::vector<uint16_t> h(x.size()), b(x.size());
  convert(x.data(), DType::F32, h.data(), DType::F16, static_cast<int64_t>(x.size()));
  convert(x.data(), DType::F32, b.data(), DType::BF16, static_cast<int64_t>(x.size()));
  std::vector<float> back(x.size());
  convert(b.data(), DType::BF16, back.data(), DType::F32, static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(h[i], f32_to_f16(x[i]));
    ASSERT_EQ(b[i], f32_to_bf16(x[i]));
    ASSERT_EQ(back[i], bf16_to_f32(b[i]));
  }
  const int64_t big[3] = {-5, int64_t{1} << 40, 7};
  int32_t small[3];
  convert(big, DType::I64, small, DType::I32, 3);
  EXPECT_EQ(small[0], -5);
  EXPECT_EQ(small[2], 7);
}

// The same tables as computed by ml_dtypes (numpy), made by the setup script's venv.
TEST(DType, DecodeTablesMatchMlDtypes) {
  const std::filesystem::path root = AVDIT_SOURCE_DIR;
  const std::filesystem::path py = root / ".venv/bin/python";
  ASSERT_TRUE(std::filesystem::exists(py)) << py << " missing: run scripts/setup.sh";
  // A per-process name: two test runs at once must not share the file.
  const std::filesystem::path table =
      std::filesystem::temp_directory_path() / ("avdit_dtypes_table_" + std::to_string(::getpid()) + ".bin");
  const std::string cmd = py.string() + " " + (root / "python/st_interop.py").string() + " dtypes-table " +
                          table.string() + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(table, std::ios::binary);
  std::vector<float> t(131344);
  in.read(reinterpret_cast<char*>(t.data()), static_cast<std::streamsize>(t.size() * 4));
  ASSERT_TRUE(in.good());
  std::filesystem::remove(table);
  auto same = [](float a, float b) {
    return (std::isnan(a) && std::isnan(b)) || std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
  };
  for (uint32_t b = 0; b < 65536; ++b) {
    ASSERT_TRUE(same(f16_to_f32(static_cast<uint16_t>(b)), t[b])) << "f16 " << b;
    ASSERT_TRUE(same(bf16_to_f32(static_cast<uint16_t>(b)), t[65536 + b])) << "bf16 " << b;
  }
  for (uint32_t b = 0; b < 256; ++b) ASSERT_TRUE(same(e4m3_to_f32(static_cast<uint8_t>(b)), t[131072 + b])) << b;
  for (uint32_t b = 0; b < 16; ++b) ASSERT_TRUE(same(e2m1_to_f32(static_cast<uint8_t>(b)), t[131328 + b])) << b;
}

}  // namespace
}  // namespace avdit
