// PhiloxEngine, SeedGenerator and PythonRandom against torchdata's and CPython's known answers.

#include <numeric>

#include <catch2/catch.hpp>

#include <dpipe/random/philox.hpp>
#include <dpipe/random/python_random.hpp>
#include <dpipe/random/seed_generator.hpp>

namespace {

using dpipe::PhiloxEngine;
using dpipe::PythonRandom;
using dpipe::SeedGenerator;

std::vector<std::uint64_t> generate(PhiloxEngine engine, int count) {
  std::vector<std::uint64_t> values;
  for (int i = 0; i < count; ++i) values.push_back(engine.generate());
  return values;
}

std::uint64_t seed_of(const PhiloxEngine& engine) {
  return (static_cast<std::uint64_t>(engine.key()[1]) << 32) | engine.key()[0];
}

TEST_CASE("PhiloxEngine: Random123 known-answer vectors", "[random][philox]") {
  CHECK(PhiloxEngine::philox({0, 0}, {0, 0, 0, 0}) ==
        PhiloxEngine::Block{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(PhiloxEngine::philox({0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}) ==
        PhiloxEngine::Block{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(PhiloxEngine::philox({0xa4093822, 0x299f31d0}, {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}) ==
        PhiloxEngine::Block{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("PhiloxEngine: torchdata's streams and spawned seeds", "[random][philox]") {
  CHECK(PhiloxEngine(0).spawn_key() == PhiloxEngine::Key{0x6627e8d5, 0xe169c58d});
  CHECK(generate(PhiloxEngine(0), 4) == std::vector<std::uint64_t>{6679402142117448868ULL, 684265014234019051ULL,
                                                                   5892734326067077929ULL, 5012847114214249389ULL});
  CHECK(generate(PhiloxEngine(1), 4) == std::vector<std::uint64_t>{16124519160171992091ULL, 12102967235123903047ULL,
                                                                   10265617376382137328ULL, 17000304051890399886ULL});
  CHECK(generate(PhiloxEngine(123), 4) == std::vector<std::uint64_t>{9025247384375923790ULL, 16000952678483384606ULL,
                                                                     4620172586781465253ULL, 17910197009540674465ULL});
  CHECK(generate(PhiloxEngine(~0ULL), 4) == std::vector<std::uint64_t>{5433557989824845073ULL, 11522556079870051042ULL,
                                                                       8015710341229073026ULL,
                                                                       11016808074022311082ULL});
  const std::uint64_t spawned0[] = {15953211147552549462ULL, 8387231961279773479ULL, 3544725869317502777ULL,
                                    4624946314901691070ULL};
  const std::uint64_t spawned123[] = {5859345418343204200ULL, 10010998959631041888ULL, 9231514597747866420ULL,
                                      6032089376190961997ULL};
  for (std::uint64_t i = 0; i < 4; ++i) {
    CHECK(seed_of(PhiloxEngine(0).spawn(i)) == spawned0[i]);
    CHECK(seed_of(PhiloxEngine(123).spawn(i)) == spawned123[i]);
  }
  // -1 in Python is 2**64-1 here.
  CHECK(PhiloxEngine(~0ULL).key() == PhiloxEngine::Key{4294967295U, 4294967295U});
}

TEST_CASE("PhiloxEngine: spawn depends only on the seed / not on the values drawn", "[random][philox]") {
  PhiloxEngine used(123);
  (void)generate(used, 7);
  used.generate();
  CHECK(used.spawn(5) == PhiloxEngine(123).spawn(5));
  CHECK(generate(PhiloxEngine(123).spawn(1), 10) == generate(PhiloxEngine(123).spawn(1), 10));
  CHECK(generate(PhiloxEngine(123).spawn(2), 10) != generate(PhiloxEngine(123).spawn(1), 10));
  PhiloxEngine reseeded(321);
  reseeded.seed(123);
  CHECK(generate(reseeded, 10) == generate(PhiloxEngine(123), 10));
  CHECK(generate(PhiloxEngine(321), 10) != generate(PhiloxEngine(123), 10));
}

TEST_CASE("PhiloxEngine: unseeded use is an error", "[random][philox]") {
  PhiloxEngine engine;
  CHECK_THROWS_MATCHES(engine.generate(), dpipe::UsageError, Catch::Message("Please provide seed to PhiloxEngine"));
  CHECK_THROWS_MATCHES(engine.spawn(0), dpipe::UsageError, Catch::Message("Please provide seed to PhiloxEngine"));
}

TEST_CASE("SeedGenerator: torchdata's shared and worker streams", "[random][seed_generator]") {
  SeedGenerator root(0);
  SeedGenerator copy = root;
  const std::vector<std::uint64_t> first3{6679402142117448868ULL, 684265014234019051ULL, 5892734326067077929ULL};
  CHECK(std::vector<std::uint64_t>{root.generate_shared_seed(), root.generate_shared_seed(),
                                   root.generate_shared_seed()} == first3);
  CHECK(std::vector<std::uint64_t>{copy.generate_seed(), copy.generate_seed(), copy.generate_seed()} == first3);

  const auto worker_stream = [](std::uint64_t worker, int count) {
    SeedGenerator seeds(0);
    auto spawned = seeds.spawn(worker);
    std::vector<std::uint64_t> values;
    for (int i = 0; i < count; ++i) values.push_back(spawned.generate_seed());
    return values;
  };
  CHECK(worker_stream(0, 4) == std::vector<std::uint64_t>{2529255664604639377ULL, 6824021748109976683ULL,
                                                          4704306196333364747ULL, 8646330892646666231ULL});
  CHECK(worker_stream(1, 4) == std::vector<std::uint64_t>{9967984995062561209ULL, 16607006139736709732ULL,
                                                          6257213759998696881ULL, 17619760425532064540ULL});
  CHECK(worker_stream(2, 3) ==
        std::vector<std::uint64_t>{6194045415202885376ULL, 6354149320996429967ULL, 1050498439431453840ULL});
  for (std::uint64_t worker = 0; worker < 4; ++worker) {
    SeedGenerator seeds(0);
    auto spawned = seeds.spawn(worker);
    CHECK(spawned.generate_shared_seed() == 6679402142117448868ULL);
    CHECK(spawned.generate_shared_seed() == 684265014234019051ULL);
  }
}

TEST_CASE("SeedGenerator: spawn continues the parent's current shared stream", "[random][seed_generator]") {
  SeedGenerator parent(123);
  parent.generate_shared_seed();
  auto child = parent.spawn(1);
  CHECK(child.generate_shared_seed() == parent.generate_shared_seed());
  auto a = SeedGenerator(123).spawn(1);
  auto b = SeedGenerator(123).spawn(2);
  for (int round = 0; round < 10; ++round) {
    CHECK(a.generate_seed() != b.generate_seed());
    CHECK(a.generate_shared_seed() == b.generate_shared_seed());
  }
  SeedGenerator in_place(0);
  in_place.spawn(1, /*inplace=*/true);
  CHECK(in_place.generate_seed() == 9967984995062561209ULL);
}

TEST_CASE("SeedGenerator: reseeding repeats / another seed differs", "[random][seed_generator]") {
  SeedGenerator seeds(123);
  std::vector<std::uint64_t> first, second, third;
  for (int i = 0; i < 10; ++i) first.push_back(seeds.generate_seed());
  seeds.seed(123);
  for (int i = 0; i < 10; ++i) second.push_back(seeds.generate_seed());
  seeds.seed(321);
  for (int i = 0; i < 10; ++i) third.push_back(seeds.generate_seed());
  CHECK(first == second);
  CHECK(first != third);
  CHECK(SeedGenerator() != SeedGenerator());  // the OS entropy source
}

TEST_CASE("SeedGenerator: round-trips through the serializer", "[random][seed_generator][serialization]") {
  SeedGenerator seeds(99);
  seeds.generate_seed();
  auto restored = dpipe::from_bytes<SeedGenerator>(dpipe::to_bytes(seeds));
  CHECK(restored == seeds);
  CHECK(restored.generate_seed() == seeds.generate_seed());
}

TEST_CASE("PythonRandom: matches CPython's random.Random", "[random][python]") {
  // Expected values printed by CPython 3.11: random.Random(seed).getrandbits(32) x3, getrandbits(64).
  struct Case {
    std::uint64_t seed;
    std::uint32_t bits32[3];
    std::uint64_t bits64;
  };
  const Case cases[] = {
      {0, {3626764237U, 1654615998U, 3255389356U}, 7106521602475165645ULL},
      {1, {577090037U, 2444712010U, 3639700191U}, 10499958131665514997ULL},
      {123, {224899942U, 1149664691U, 374463918U}, 4937772249435845478ULL},
      {4294967295ULL, {2728839433U, 2661025012U, 872737089U}, 11429015403106846985ULL},
      {4294967296ULL, {485306839U, 1508871100U, 1794561286U}, 6480552028864852439ULL},
      {6679402142117448868ULL, {1868003033U, 2042869460U, 4153021063U}, 8774057522565183193ULL},
      {18446744073709551615ULL, {93740670U, 1068495656U, 1452108352U}, 4589153898531806846ULL},
  };
  for (const auto& c : cases) {
    INFO("seed " << c.seed);
    PythonRandom rng(c.seed);
    for (const auto expected : c.bits32) CHECK(rng.getrandbits(32) == expected);
    CHECK(PythonRandom(c.seed).getrandbits(64) == c.bits64);
  }
  PythonRandom rng(42);
  std::vector<std::int64_t> ints;
  for (int i = 0; i < 8; ++i) ints.push_back(rng.randint(0, 1000));
  CHECK(ints == std::vector<std::int64_t>{654, 114, 25, 759, 281, 250, 228, 142});
  PythonRandom wide(7);  // random.Random(7).randrange(2**40 + 5) x3
  CHECK(wide.randbelow((1ULL << 40) + 5) == 868231286071ULL);
  CHECK(wide.randbelow((1ULL << 40) + 5) == 105874957392ULL);
  CHECK(wide.randbelow((1ULL << 40) + 5) == 208460025899ULL);
}

TEST_CASE("PythonRandom: sample uses CPython's pool and set methods", "[random][python]") {
  std::vector<int> ten(10), hundred(100), thousand(1000);
  std::iota(ten.begin(), ten.end(), 0);
  std::iota(hundred.begin(), hundred.end(), 0);
  std::iota(thousand.begin(), thousand.end(), 0);
  CHECK(PythonRandom(0).sample(ten, 10) == std::vector<int>{6, 9, 0, 2, 4, 3, 5, 1, 8, 7});
  CHECK(PythonRandom(5).sample(thousand, 7) == std::vector<int>{637, 261, 759, 367, 814, 707, 965});
  CHECK(PythonRandom(9).sample(hundred, 6) == std::vector<int>{59, 78, 47, 34, 17, 23});
}

TEST_CASE("PythonRandom: invalid arguments", "[random][python]") {
  PythonRandom rng;
  CHECK_THROWS_MATCHES(rng.randbelow(0), dpipe::InvalidArgument, Catch::Message("randbelow requires n > 0"));
  CHECK_THROWS_MATCHES(rng.randint(3, 2), dpipe::InvalidArgument, Catch::Message("empty range for randint(3, 2)"));
  CHECK_THROWS_MATCHES(rng.getrandbits(65), dpipe::InvalidArgument,
                       Catch::Message("getrandbits supports at most 64 bits, got 65"));
}

}  // namespace
