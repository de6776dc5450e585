// A libtorch trainer fed by dpipe: an MLP learns a synthetic classification set stored as TFRecord
// files, for 2 epochs, with 2 worker processes. Batches arrive as contiguous tensors
// (tensor_collate) and become torch::Tensors through DLPack without a copy. The example then
// trains again, stops mid-epoch with a checkpoint (the loader's state and the model's), resumes
// in a new process, and checks that the resumed losses equal the uninterrupted ones, bit for bit.
//
// libtorch_trainer                      writes the data, runs the three trainings as child processes
// libtorch_trainer train DIR LOSSES [--stop-at STEP CHECKPOINT | --resume CHECKPOINT]

#include <ATen/DLConvertor.h>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>
#include <vector>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "tfrecord_writing.hpp"

extern char** environ;

namespace {

constexpr std::int64_t kFeatures = 16;
constexpr std::int64_t kClasses = 4;
constexpr int kFiles = 4;
constexpr int kSamplesPerFile = 256;
constexpr std::size_t kBatch = 32;
constexpr int kEpochs = 2;

// [sample]
struct Sample {
  dpipe::Tensor features;  // float32 [16]
  std::int64_t label = 0;
  DPIPE_FIELDS(features, label)
};
// [sample]

/// A record: the label (int64), then the features (float32), little-endian as this machine is.
Sample parse(const std::string& record) {
  Sample sample;
  std::memcpy(&sample.label, record.data(), sizeof(sample.label));
  sample.features = dpipe::Tensor(dpipe::DType::kFloat32, {kFeatures});
  std::memcpy(sample.features.data(), record.data() + sizeof(sample.label), sample.features.nbytes());
  return sample;
}

/// kFiles files of kSamplesPerFile records: each class's features scatter around its own centre.
void write_dataset(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::mt19937 random(1234);
  std::normal_distribution<float> noise(0.0F, 1.0F);
  std::vector<std::vector<float>> centres(kClasses, std::vector<float>(kFeatures));
  for (auto& centre : centres) {
    for (auto& value : centre) value = 2.0F * noise(random);
  }
  for (int file = 0; file < kFiles; ++file) {
    std::ofstream out(dir / ("part-" + std::to_string(file) + ".tfrecord"), std::ios::binary);
    for (int i = 0; i < kSamplesPerFile; ++i) {
      const std::int64_t label = static_cast<std::int64_t>(random() % kClasses);
      std::string record(reinterpret_cast<const char*>(&label), sizeof(label));
      for (const float centre : centres[static_cast<std::size_t>(label)]) {
        const float value = centre + 3.0F * noise(random);
        record.append(reinterpret_cast<const char*>(&value), sizeof(value));
      }
      out << dpipe_examples::framed(record);
    }
  }
}

// [loader]
dpipe::DataLoader2<dpipe::TensorBatch<Sample>> make_loader(const std::filesystem::path& dir) {
  auto batches = dpipe::io::list_files(dir.string(), {"*.tfrecord"})       //
                 | dpipe::iter::shuffle()                                  // a new file order every epoch
                 | dpipe::iter::sharding_filter()                          // each worker reads its files
                 | dpipe::io::open_files()                                 //
                 | dpipe::io::tfrecord_records()                           // each record's bytes
                 | dpipe::iter::map(parse)                                 //
                 | dpipe::iter::shuffle(128)                               //
                 | dpipe::iter::batch(kBatch)                              //
                 | dpipe::iter::collate(dpipe::tensor_collate<Sample>());  // one contiguous tensor per field
  return dpipe::DataLoader2<dpipe::TensorBatch<Sample>>(batches,
                                                        dpipe::MultiProcessingReadingService({.num_workers = 2}));
}
// [loader]

/// The bytes of a file.
std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
  return {data, data + bytes.size()};
}

struct TrainOptions {
  std::filesystem::path data;
  std::filesystem::path losses;
  int stop_at = -1;                  // the step after which to checkpoint and stop; -1: never
  std::filesystem::path checkpoint;  // where to save (with stop_at) or restore from (resume)
  bool resume = false;
};

/// Trains (or resumes) and writes each step's loss, as a hexadecimal float, to `options.losses`.
int train(const TrainOptions& options) {
  torch::manual_seed(0);
  torch::set_num_threads(1);  // the same arithmetic in every run
  torch::nn::Sequential model(torch::nn::Linear(kFeatures, 32), torch::nn::ReLU(), torch::nn::Linear(32, kClasses));
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  auto loader = make_loader(options.data);
  loader.seed(7);
  int epoch = 0;
  int step = 0;
  if (options.resume) {
    torch::load(model, (options.checkpoint / "model.pt").string());
    torch::load(optimizer, (options.checkpoint / "optimizer.pt").string());
    loader.load_state_dict(read_bytes(options.checkpoint / "loader.state"));
    std::ifstream(options.checkpoint / "progress.txt") >> epoch >> step;
  }
  std::ofstream losses(options.losses);
  int copied = 0;
  for (; epoch < kEpochs; ++epoch) {
    // [step]
    for (const auto& batch : loader) {
      // No copy: the torch::Tensors use the batch's buffers, and keep them alive.
      const auto features = at::fromDLPack(dpipe::to_dlpack(batch[&Sample::features]).release());
      const auto labels = at::fromDLPack(dpipe::to_dlpack(batch[&Sample::label]).release());
      if (features.data_ptr() != batch[&Sample::features].data() || labels.data_ptr() != batch[&Sample::label].data()) {
        ++copied;
      }
      optimizer.zero_grad();
      const auto loss = torch::nn::functional::cross_entropy(model->forward(features), labels);
      loss.backward();
      optimizer.step();
      // [step]
      losses << step << ' ' << epoch << ' ' << std::hexfloat << loss.item<float>() << std::defaultfloat << ' '
             << loss.item<float>() << '\n';
      ++step;
      if (step == options.stop_at) {
        std::filesystem::create_directories(options.checkpoint);
        const auto state = loader.state_dict();
        std::ofstream(options.checkpoint / "loader.state", std::ios::binary)
            .write(reinterpret_cast<const char*>(state.data()), static_cast<std::streamsize>(state.size()));
        torch::save(model, (options.checkpoint / "model.pt").string());
        torch::save(optimizer, (options.checkpoint / "optimizer.pt").string());
        std::ofstream(options.checkpoint / "progress.txt") << epoch << ' ' << step << '\n';
        losses << "copied " << copied << '\n';
        return 0;
      }
    }
  }
  losses << "copied " << copied << '\n';
  return 0;
}

/// Runs this program with `args` in a new process and waits for it.
int run_child(const std::vector<std::string>& args) {
  std::vector<std::string> strings{"/proc/self/exe"};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& argument : strings) argv.push_back(argument.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0) return 1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/// The losses file's step lines, and the count of batches that were copied on their way to torch.
struct Losses {
  std::vector<std::string> steps;
  int copied = 0;
};

Losses read_losses(const std::filesystem::path& path) {
  Losses losses;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("copied ")) {
      losses.copied += std::stoi(line.substr(7));
    } else {
      losses.steps.push_back(line);
    }
  }
  return losses;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::string(argv[1]) == "train") {
    TrainOptions options;
    options.data = argv[2];
    options.losses = argv[3];
    if (argc == 7 && std::string(argv[4]) == "--stop-at") {
      options.stop_at = std::stoi(argv[5]);
      options.checkpoint = argv[6];
    } else if (argc == 6 && std::string(argv[4]) == "--resume") {
      options.checkpoint = argv[5];
      options.resume = true;
    } else if (argc != 4) {
      std::fprintf(stderr, "usage: %s train DIR LOSSES [--stop-at STEP CHECKPOINT | --resume CHECKPOINT]\n", argv[0]);
      return 2;
    }
    return train(options);
  }

  const auto dir = std::filesystem::temp_directory_path() / ("dpipe-libtorch-" + std::to_string(getpid()));
  write_dataset(dir / "data");
  const std::string data = (dir / "data").string();
  const std::string checkpoint = (dir / "checkpoint").string();
  constexpr int kStopAt = 21;  // mid-epoch: an epoch has 32 steps
  if (run_child({"train", data, (dir / "uninterrupted.txt").string()}) != 0 ||
      run_child({"train", data, (dir / "first.txt").string(), "--stop-at", std::to_string(kStopAt), checkpoint}) != 0 ||
      run_child({"train", data, (dir / "resumed.txt").string(), "--resume", checkpoint}) != 0) {
    std::printf("a training run failed\n");
    return 1;
  }
  const auto uninterrupted = read_losses(dir / "uninterrupted.txt");
  const auto first = read_losses(dir / "first.txt");
  const auto resumed = read_losses(dir / "resumed.txt");
  std::filesystem::remove_all(dir);

  std::printf("uninterrupted: %zu steps over %d epochs, loss %s -> %s\n", uninterrupted.steps.size(), kEpochs,
              uninterrupted.steps.front().substr(uninterrupted.steps.front().rfind(' ') + 1).c_str(),
              uninterrupted.steps.back().substr(uninterrupted.steps.back().rfind(' ') + 1).c_str());
  std::printf("stopped after step %d with a checkpoint, resumed in a new process for %zu more steps\n", kStopAt,
              resumed.steps.size());
  std::printf("batches copied on their way to torch: %d of %zu\n", uninterrupted.copied + first.copied + resumed.copied,
              uninterrupted.steps.size() + first.steps.size() + resumed.steps.size());
  auto joined = first.steps;
  joined.insert(joined.end(), resumed.steps.begin(), resumed.steps.end());
  const bool equal = joined == uninterrupted.steps;
  std::printf("resumed losses equal the uninterrupted losses, bit for bit: %s\n", equal ? "yes" : "no");
  if (!equal) {
    for (std::size_t i = 0; i < std::max(joined.size(), uninterrupted.steps.size()); ++i) {
      std::printf("  %s | %s\n", i < uninterrupted.steps.size() ? uninterrupted.steps[i].c_str() : "-",
                  i < joined.size() ? joined[i].c_str() : "-");
    }
  }
  return equal ? 0 : 1;
}
