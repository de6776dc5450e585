// The serialization customization point: round trips for every covered type and a user struct,
// and clear errors for truncated or corrupt input.

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/serialization/serializer.hpp>

namespace {

struct Sample {
  std::string path;
  std::vector<float> pixels;
  int label = 0;
  DPIPE_FIELDS(path, pixels, label)
  friend bool operator==(const Sample&, const Sample&) = default;
};

struct Point {  // trivially copyable: encoded byte for byte
  double x;
  double y;
  friend bool operator==(const Point&, const Point&) = default;
};

struct NotSerializable {
  std::vector<int>* pointer_owner;
  std::string name;
};

enum class Color : std::uint8_t { kRed = 1, kBlue = 7 };

template <class T>
void check_round_trip(const T& value) {
  INFO(dpipe::type_name<T>());
  CHECK(dpipe::from_bytes<T>(dpipe::to_bytes(value)) == value);
}

TEST_CASE("Serializer: round-trips every covered type", "[serialization]") {
  check_round_trip(42);
  check_round_trip(-7LL);
  check_round_trip(3.5);
  check_round_trip(true);
  check_round_trip(Color::kBlue);
  check_round_trip(std::string("hello, dpipe"));
  check_round_trip(std::string());
  check_round_trip(std::vector<std::int64_t>{1, -2, 3});
  check_round_trip(std::vector<bool>{true, false, true});
  check_round_trip(std::vector<std::string>{"a", "", "ccc"});
  check_round_trip(std::array<int, 3>{4, 5, 6});
  check_round_trip(std::pair<int, std::string>{1, "one"});
  check_round_trip(std::tuple<int, double, std::string>{1, 2.5, "three"});
  check_round_trip(std::tuple<>{});
  check_round_trip(std::optional<int>{});
  check_round_trip(std::optional<std::string>{"x"});
  check_round_trip(std::variant<int, std::string>{std::string("alt")});
  check_round_trip(std::variant<int, std::string>{17});
  check_round_trip(std::map<std::string, int>{{"a", 1}, {"b", 2}});
  check_round_trip(std::unordered_map<int, std::vector<int>>{{1, {1}}, {2, {2, 2}}});
  check_round_trip(std::set<int>{3, 1, 2});
  check_round_trip(Point{1.5, -2.0});
  check_round_trip(Sample{"img/0.png", {0.25F, 0.5F}, 3});
  check_round_trip(std::vector<Sample>{{"a", {1.0F}, 1}, {"b", {}, 2}});
  check_round_trip(std::vector<std::tuple<>>(3));
}

struct Shape {  // polymorphic: a std::unique_ptr<Shape> may point at a derived object
  virtual ~Shape() = default;
  int sides = 0;
  DPIPE_FIELDS(sides)
};

TEST_CASE("Serializer: std::unique_ptr is encoded as its pointee or null", "[serialization]") {
  const auto sample = std::make_unique<Sample>(Sample{"img/1.png", {0.5F}, 7});
  const auto decoded = dpipe::from_bytes<std::unique_ptr<Sample>>(dpipe::to_bytes(sample));
  REQUIRE(decoded != nullptr);
  CHECK(decoded.get() != sample.get());
  CHECK(*decoded == *sample);
  CHECK(dpipe::from_bytes<std::unique_ptr<Sample>>(dpipe::to_bytes(std::unique_ptr<Sample>())) == nullptr);
  std::vector<std::unique_ptr<int>> batch;
  batch.push_back(std::make_unique<int>(3));
  batch.push_back(nullptr);
  const auto decoded_batch = dpipe::from_bytes<std::vector<std::unique_ptr<int>>>(dpipe::to_bytes(batch));
  REQUIRE(decoded_batch.size() == 2);
  CHECK(*decoded_batch[0] == 3);
  CHECK(decoded_batch[1] == nullptr);
  auto flag = dpipe::to_bytes(std::make_unique<int>(1));
  flag[0] = std::byte{9};
  CHECK_THROWS_MATCHES(dpipe::from_bytes<std::unique_ptr<int>>(flag), dpipe::SerializationError,
                       Catch::Message("corrupt input: 9 is not a bool"));
  // Encoding a derived object as its base would lose its derived part: not covered.
  static_assert(!dpipe::serializable<std::unique_ptr<Shape>>);
}

TEST_CASE("Serializer: which types are serializable", "[serialization]") {
  static_assert(dpipe::serializable<Sample>);
  static_assert(dpipe::serializable<Point>);
  static_assert(dpipe::serializable<std::vector<std::pair<int, Sample>>>);
  static_assert(!dpipe::serializable<NotSerializable>);
  static_assert(!dpipe::serializable<std::vector<NotSerializable>>);
  static_assert(!dpipe::serializable<int*>);
}

TEST_CASE("Serializer: truncated input is an error / never a read past the end", "[serialization]") {
  const auto bytes = dpipe::to_bytes(std::vector<std::string>{"abc", "defg"});
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    INFO("size " << size);
    CHECK_THROWS_AS(dpipe::from_bytes<std::vector<std::string>>(std::span(bytes).first(size)),
                    dpipe::SerializationError);
  }
  CHECK_THROWS_MATCHES(dpipe::from_bytes<std::uint64_t>(std::span(bytes).first(3)), dpipe::SerializationError,
                       Catch::Message("truncated input: needed 8 bytes, 3 left"));
}

TEST_CASE("Serializer: impossible counts and invalid tags are rejected", "[serialization]") {
  auto bytes = dpipe::to_bytes(std::vector<std::int64_t>{1, 2});
  bytes[0] = std::byte{0xff};  // a count of 255 elements in 16 bytes
  CHECK_THROWS_MATCHES(dpipe::from_bytes<std::vector<std::int64_t>>(bytes), dpipe::SerializationError,
                       Catch::Message("corrupt input: a count of 255 elements exceeds the 16 bytes left"));

  auto variant = dpipe::to_bytes(std::variant<int, float>{1});
  variant[0] = std::byte{5};
  CHECK_THROWS_MATCHES((dpipe::from_bytes<std::variant<int, float>>(variant)), dpipe::SerializationError,
                       Catch::Message("corrupt input: variant index 5 of 2 alternatives"));

  auto flag = dpipe::to_bytes(true);
  flag[0] = std::byte{2};
  CHECK_THROWS_MATCHES(dpipe::from_bytes<bool>(flag), dpipe::SerializationError,
                       Catch::Message("corrupt input: 2 is not a bool"));

  auto trailing = dpipe::to_bytes(std::int32_t{1});
  trailing.push_back(std::byte{0});
  CHECK_THROWS_MATCHES(dpipe::from_bytes<std::int32_t>(trailing), dpipe::SerializationError,
                       Catch::Message("1 trailing bytes after a int"));
}

}  // namespace
