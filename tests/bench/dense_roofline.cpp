// dense_roofline (issue 17): how close satrap's dense step comes to the machine's GEMM limit.
//
// For a model shape (the default job's DLRM, or the Criteo Kaggle DLRM of train_vs_torch.sh):
//  - FLOPs per sample of forward + backward: every linear layer's GEMMs (2*in*out each for y, dW
//    and dX; no dX for the first layer, whose input is data) and the pairwise-dot interaction
//    (forward n(n-1)/2 dots, backward n x n weighted sums, n = slots + 1, over dim).
//  - The machine's sgemm rate on the model's own GEMMs: each GEMM of satrap's linear layers
//    (same shapes, same transposes), timed alone two ways at 1 thread, one OpenBLAS call for the
//    whole batch and as linear.cpp makes it (linear_gemm_*: narrow layers in blocks of rows to
//    OpenBLAS's small-matrix kernel), the faster counting; with OpenBLAS at 1 thread
//    (the calling thread's CPU time: one core's rate, steady while other jobs load the machine) and at
//    2 threads (wall clock: what both cores give, only meaningful on a quiet machine); the rate is
//    the GEMMs' FLOPs over the better thread count's summed time.
//  - roofline_sps = rate / (FLOPs per sample): the samples/s the machine allows if every FLOP of
//    the step ran at sgemm speed (the interaction counted at that speed too).
//    Since 2026-12-05 also a third way (gemm_gflops_split): the GEMMs at half the batch, run by two
//    threads at once, each at 1 OpenBLAS thread (wall clock) - what the batch split
//    (models/dense/batch_split.hpp) asks of the machine; the roofline takes the best of the three.
//  - satrap's dense step, dense_model::forward_backward + dense_optimizer::step on a fixed batch:
//    satrap_sps with OpenBLAS at 1 thread (CPU time; also by wall clock), satrap_2t_wall_sps at
//    2 OpenBLAS threads (the zoo's model unsplit, wall clock; how trainers ran until 2026-12-05),
//    satrap_split_wall_sps (the trainer's model at 2 threads: the batch split), and
//    satrap_auto_sps at the thread count a trainer of `satrap train` takes for this model on this
//    machine (training.blas_threads auto, blas_threads.hpp: 2 for the Kaggle shape on 2 cores,
//    then the split; 1 for the default model), auto_threads.
//  - roofline_fraction = satrap_auto_sps / roofline_sps, each at its best thread count (goal >=
//    0.85); roofline_fraction_1t / _2t compare the two at the same thread count;
//    roofline_fraction_one_call = satrap_sps against the 1-thread rate of the one-call GEMMs
//    alone (the roofline of the figures before 2026-12-02).
//    Until 2026-12-03 roofline_fraction was satrap at 1 thread against the roofline at the better
//    thread count: on a quiet machine, where OpenBLAS's 2 threads beat one, that set one core
//    against two.
// Where the step's time goes is printed beside it: the GEMMs alone at 1 thread, the interaction
// forward + backward, the optimizer step, and the rest (activations, BCE, copies).
//
// The measurements interleave rep after rep in one process (the machine is shared); medians.
// usage: dense_roofline [default|kaggle|both] [reps=7] [min_ms=150]
// Last line per model: key=value pairs.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "models/assert.hpp"
#include "models/dense/batch_split.hpp"
#include "models/dense/blas_threads.hpp"
#include "models/dense/dense_optimizer.hpp"
#include "models/dense/interaction.hpp"
#include "models/dense/linear.hpp"
#include "models/dense/model_zoo.hpp"

namespace {

using namespace satrap;
using clock_type = std::chrono::steady_clock;

struct shape {
  std::string name;
  dense_model_config model;
  int batch;
  dense_optimizer_options optimizer;
};

// One GEMM of a linear layer, two ways: `run`, one OpenBLAS call for the whole batch (as
// models/dense/linear.cpp made them until 2026-12-02), and `blocked`, as linear.cpp makes it now
// (linear_gemm_*: narrow layers in blocks of rows to OpenBLAS's small-matrix kernel; the same
// single call for wide ones). The roofline takes the faster of the two per GEMM.
struct gemm_call {
  std::string what;
  double flops;
  std::function<void()> run;
  std::function<void()> blocked;  // null: the same as run
};

struct buffers {
  std::vector<std::vector<float>> store;
  float* make(size_t n, std::mt19937& rng) {
    std::normal_distribution<float> d(0.0f, 0.5f);
    store.emplace_back(n);
    for (float& v : store.back())
      v = d(rng);
    return store.back().data();
  }
};

// The linear layers (in, out) of the model, bottom then top; first = the bottom's first layer.
std::vector<std::pair<int, int>> layers(const std::vector<int>& hidden, int in, int out) {
  std::vector<std::pair<int, int>> l;
  int fan_in = in;
  for (int h : hidden) {
    l.emplace_back(fan_in, h);
    fan_in = h;
  }
  l.emplace_back(fan_in, out);
  return l;
}

std::vector<gemm_call> model_gemms(const shape& s, buffers& buf, std::mt19937& rng) {
  const auto& m = s.model;
  std::vector<gemm_call> calls;
  auto add_layers = [&](const char* tower, const std::vector<std::pair<int, int>>& ls,
                        bool first_has_dx) {
    for (size_t i = 0; i < ls.size(); ++i) {
      const int n = s.batch, in = ls[i].first, out = ls[i].second;
      float* x = buf.make(size_t(n) * in, rng);
      float* w = buf.make(size_t(out) * in, rng);
      float* y = buf.make(size_t(n) * out, rng);
      float* dy = buf.make(size_t(n) * out, rng);
      float* dw = buf.make(size_t(out) * in, rng);
      float* dx = buf.make(size_t(n) * in, rng);
      const double f = 2.0 * n * in * out;
      const std::string tag = std::string(tower) + std::to_string(in) + "x" + std::to_string(out);
      if (out == 1) {
        calls.push_back(
          {tag + ":fwd",
           f,
           [=] { cblas_sgemv(CblasRowMajor, CblasNoTrans, n, in, 1.0f, x, in, w, 1, 1.0f, y, 1); },
           {}});
        calls.push_back(
          {tag + ":dw",
           f,
           [=] { cblas_sgemv(CblasRowMajor, CblasTrans, n, in, 1.0f, x, in, dy, 1, 0.0f, dw, 1); },
           {}});
        if (i > 0 || first_has_dx)
          calls.push_back({tag + ":dx",
                           f,
                           [=] {
                             for (int r = 0; r < n; ++r)
                               for (int k = 0; k < in; ++k)
                                 dx[size_t(r) * in + k] = dy[r] * w[k];
                           },
                           {}});
        continue;
      }
      float* wt = buf.make(size_t(out) * in, rng);  // W^T, as linear_forward_relu writes it
      calls.push_back({tag + ":fwd", f,
                       [=] {
                         cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x,
                                     in, w, in, 1.0f, y, out);
                       },
                       [=] { linear_gemm_y(n, in, out, x, w, wt, y); }});
      calls.push_back({tag + ":dw", f,
                       [=] {
                         cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy,
                                     out, x, in, 0.0f, dw, in);
                       },
                       [=] { linear_gemm_dw(n, in, out, x, dy, dw); }});
      if (i > 0 || first_has_dx)
        calls.push_back({tag + ":dx", f,
                         [=] {
                           cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f,
                                       dy, out, w, in, 0.0f, dx, in);
                         },
                         [=] { linear_gemm_dx(n, in, out, dy, w, dx); }});
    }
  };
  add_layers("bottom", layers(m.bottom, m.dense_features, m.dim), false);
  add_layers("top", layers(m.top, interaction_output_size(m.slots, m.dim), 1), true);
  return calls;
}

double interaction_flops(const dense_model_config& m) {
  const double n = m.slots + 1;
  return 2.0 * n * (n - 1) / 2 * m.dim  // forward dots
         + 2.0 * n * n * m.dim;         // backward: each vector's gradient, a weighted sum of n
}

// The calling thread's CPU time. (Until 2026-12-02 the whole process's: that counted OpenBLAS's
// worker, which spins in sched_yield for a while after the 2-thread GEMMs, into the 1-thread
// figures measured after them: the interaction and optimizer splits read up to 2x.)
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Seconds per call of f (wall clock and the calling thread's CPU time), over repeated calls until
// min_s of that CPU time has been spent (after one warm call). At 1 OpenBLAS thread the calling
// thread does all the work.
struct timing {
  double wall = 0, cpu = 0;
};
timing time_per_call(const std::function<void()>& f, double min_s) {
  f();
  int64_t calls = 0;
  auto start = clock_type::now();
  const double cpu0 = thread_cpu_s();
  double cpu = 0;
  do {
    f();
    ++calls;
    cpu = thread_cpu_s() - cpu0;
  } while (cpu < min_s);
  const double wall = std::chrono::duration<double>(clock_type::now() - start).count();
  return {wall / calls, cpu / calls};
}

// Seconds per round of two threads at once, each running its own list of GEMMs (at 1 OpenBLAS
// thread, as linear.cpp makes them) once per round, `rounds` rounds; wall clock from a common start
// to the later finish. What the machine's two cores give to the batch split (batch_split.hpp):
// each thread runs half the batch's GEMMs.
double concurrent_round(const std::vector<gemm_call>& a, const std::vector<gemm_call>& b,
                        int rounds) {
  auto run = [rounds](const std::vector<gemm_call>& calls) {
    for (int r = 0; r < rounds; ++r)
      for (auto& c : calls)
        (c.blocked ? c.blocked : c.run)();
  };
  run(a);  // warm
  run(b);
  auto start = clock_type::now();
  std::thread other([&] { run(b); });
  run(a);
  other.join();
  return std::chrono::duration<double>(clock_type::now() - start).count() / rounds;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

void run_shape(const shape& s, int reps, double min_s) {
  std::mt19937 rng(17);
  buffers buf;
  auto calls = model_gemms(s, buf, rng);
  // The same GEMMs at half the batch, twice (two threads' own buffers): the batch split's GEMMs.
  shape half = s;
  half.batch = s.batch / 2;
  buffers buf_a, buf_b;
  auto calls_a = model_gemms(half, buf_a, rng), calls_b = model_gemms(half, buf_b, rng);
  double gemm_flops = 0;
  for (auto& c : calls)
    gemm_flops += c.flops;
  const double flops_per_sample = gemm_flops / s.batch + interaction_flops(s.model);

  // The dense step's inputs: dense features, pooled embeddings, labels.
  const auto& m = s.model;
  // `model`: the zoo's model, OpenBLAS at 1 or 2 threads; `split`: the trainer's model at 2
  // threads, the batch split in two halves, each at 1 OpenBLAS thread (batch_split.hpp).
  auto model = make_dense_model(m, 7);
  batch_split_model split(m, 7, 2);
  dense_optimizer optimizer(s.optimizer, model->params().size());
  dense_optimizer split_optimizer(s.optimizer, split.params().size());
  float* dense = buf.make(size_t(s.batch) * m.dense_features, rng);
  float* pooled = buf.make(size_t(s.batch) * m.slots * m.dim, rng);
  std::vector<float> labels(s.batch), logits(s.batch),
    pooled_grad(size_t(s.batch) * m.slots * m.dim);
  for (int i = 0; i < s.batch; ++i)
    labels[i] = float(rng() & 1);
  auto step = [&] {
    model->forward_backward(s.batch, dense, pooled, labels.data(), 1.0f / float(s.batch),
                            logits.data(), pooled_grad.data());
    optimizer.step(model->params(), model->grads());
  };
  // The interaction alone, on the same sizes.
  float* ix = buf.make(size_t(s.batch) * m.dim, rng);
  const int iw = interaction_output_size(m.slots, m.dim);
  float* iz = buf.make(size_t(s.batch) * iw, rng);
  float* idx = buf.make(size_t(s.batch) * m.dim, rng);
  float* idemb = buf.make(size_t(s.batch) * m.slots * m.dim, rng);
  auto interaction = [&] {
    interaction_forward(s.batch, m.slots, m.dim, ix, pooled, iz);
    interaction_backward(s.batch, m.slots, m.dim, ix, pooled, iz, idx, idemb);
  };
  auto opt_only = [&] { optimizer.step(model->params(), model->grads()); };
  auto split_step = [&] {
    split.forward_backward(s.batch, dense, pooled, labels.data(), 1.0f / float(s.batch),
                           logits.data(), pooled_grad.data());
    split_optimizer.step(split.params(), split.grads());
  };

  // Per rep: GEMMs at 1 thread (CPU time: the work of one core, steady under load), at 2
  // threads (wall clock: what two cores deliver, meaningful on a quiet machine only), the step at
  // 1 thread (CPU and wall) and at 2 threads (wall), the interaction and the optimizer (CPU).
  std::vector<double> gemm_1t, gemm_1t_one, gemm_2t, gemm_split, step_cpu, step_wall, step_2t,
    step_split, inter_t, opt_t;
  std::vector<std::vector<double>> per_call(calls.size()), per_call_blocked(calls.size());
  for (int r = 0; r < reps; ++r) {
    for (int threads : {1, 2}) {
      blas_threads_apply(threads);
      double total = 0, total_one = 0;
      for (size_t c = 0; c < calls.size(); ++c) {
        timing t = time_per_call(calls[c].run, min_s / double(calls.size()));
        double best = threads == 1 ? t.cpu : t.wall;
        if (threads == 1) {
          per_call[c].push_back(t.cpu);
          double b = t.cpu;
          if (calls[c].blocked)
            b = time_per_call(calls[c].blocked, min_s / double(calls.size())).cpu;
          per_call_blocked[c].push_back(b);
          best = std::min(best, b);
        }
        total += best;
        if (threads == 1)
          total_one += t.cpu;
      }
      if (threads == 1)
        gemm_1t_one.push_back(total_one);
      (threads == 1 ? gemm_1t : gemm_2t).push_back(total);
      timing st = time_per_call(step, min_s);
      if (threads == 1) {
        step_cpu.push_back(st.cpu);
        step_wall.push_back(st.wall);
      } else {
        step_2t.push_back(st.wall);
      }
    }
    blas_threads_apply(1);
    const int rounds = std::max(3, static_cast<int>(min_s / std::max(gemm_1t.back() / 2, 1e-4)));
    gemm_split.push_back(concurrent_round(calls_a, calls_b, rounds));
    step_split.push_back(time_per_call(split_step, min_s).wall);
    SATRAP_ASSERT(split.last_parts() == 2, "parts={}", split.last_parts());
    blas_threads_apply(1);
    inter_t.push_back(time_per_call(interaction, min_s / 4).cpu);
    opt_t.push_back(time_per_call(opt_only, min_s / 4).cpu);
    std::fprintf(stderr,
                 "%s rep %d: gemm 1t %.3f ms cpu, 2t %.3f ms wall; step 1t %.3f ms cpu %.3f ms "
                 "wall, 2t %.3f ms wall; split: gemm %.3f ms wall, step %.3f ms wall\n",
                 s.name.c_str(), r, gemm_1t.back() * 1e3, gemm_2t.back() * 1e3,
                 step_cpu.back() * 1e3, step_wall.back() * 1e3, step_2t.back() * 1e3,
                 gemm_split.back() * 1e3, step_split.back() * 1e3);
  }
  const double g1 = median(gemm_1t), g2 = median(gemm_2t), gs = median(gemm_split);
  const double rate = gemm_flops / std::min({g1, g2, gs});
  const double roofline_sps = rate / flops_per_sample;
  const double s1 = median(step_cpu);
  const double satrap_sps = s.batch / s1;
  const double inter = median(inter_t), opt = median(opt_t);
  for (size_t c = 0; c < calls.size(); ++c) {
    double t = median(per_call[c]), tb = median(per_call_blocked[c]);
    std::printf(
      "%s gemm %-18s %8.3f ms %6.1f GFLOP/s one call, %8.3f ms %6.1f GFLOP/s as "
      "linear.cpp (1 thread, CPU time)\n",
      s.name.c_str(), calls[c].what.c_str(), t * 1e3, calls[c].flops / t * 1e-9, tb * 1e3,
      calls[c].flops / tb * 1e-9);
  }
  std::printf(
    "%s step at 1 thread (CPU time): %.3f ms = gemm %.3f + interaction %.3f + "
    "optimizer %.3f + rest %.3f\n",
    s.name.c_str(), s1 * 1e3, g1 * 1e3, inter * 1e3, opt * 1e3, (s1 - g1 - inter - opt) * 1e3);
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int auto_threads = std::min(2, auto_blas_threads(s.model, cores));
  const double satrap_2t_sps = s.batch / median(step_2t);
  const double satrap_split_sps = s.batch / median(step_split);
  const double satrap_auto_sps = auto_threads >= 2 ? satrap_split_sps : satrap_sps;
  const double roofline_1t = gemm_flops / g1 / flops_per_sample;
  const double roofline_2t = gemm_flops / g2 / flops_per_sample;
  const double roofline_split = gemm_flops / gs / flops_per_sample;
  std::printf(
    "model=%s batch=%d flops_per_sample=%.0f gemm_gflops_1t=%.1f gemm_gflops_2t=%.1f "
    "gemm_gflops_split=%.1f roofline_sps=%.0f satrap_sps=%.0f satrap_wall_sps=%.0f "
    "satrap_2t_wall_sps=%.0f satrap_split_wall_sps=%.0f auto_threads=%d "
    "satrap_auto_sps=%.0f roofline_fraction=%.3f roofline_fraction_1t=%.3f "
    "roofline_fraction_2t=%.3f roofline_fraction_split=%.3f "
    "roofline_fraction_one_call=%.3f split_vs_2t=%.3f reps=%d\n",
    s.name.c_str(), s.batch, flops_per_sample, gemm_flops / g1 * 1e-9, gemm_flops / g2 * 1e-9,
    gemm_flops / gs * 1e-9, roofline_sps, satrap_sps, s.batch / median(step_wall), satrap_2t_sps,
    satrap_split_sps, auto_threads, satrap_auto_sps, satrap_auto_sps / roofline_sps,
    satrap_sps / roofline_1t, satrap_2t_sps / roofline_2t, satrap_split_sps / roofline_split,
    satrap_sps / (gemm_flops / median(gemm_1t_one) / flops_per_sample),
    satrap_split_sps / satrap_2t_sps, reps);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "both";
  const int reps = argc > 2 ? std::atoi(argv[2]) : 7;
  const double min_s = (argc > 3 ? std::atof(argv[3]) : 150.0) / 1e3;
  if ((which != "default" && which != "kaggle" && which != "both") || reps < 1 || min_s <= 0) {
    std::fprintf(stderr, "usage: dense_roofline [default|kaggle|both] [reps=7] [min_ms=150]\n");
    return 2;
  }
  // The default job's DLRM until 2026-12-02 (the zoo's shape: top 64-32, batch 1024, Adam), on which
  // issue 17's goal was set. The default job now has a linear top (reference_trainer.hpp), whose
  // step has almost no GEMM to hold to a GEMM roofline.
  shape def{"default", dense_model_config{}, 1024, dense_optimizer_options{}};
  // The Criteo Kaggle DLRM of train_vs_torch.sh: 26 slots, bottom 512-256-64, top 512-256,
  // batch 2048, Adagrad.
  dense_model_config kaggle_model;
  kaggle_model.slots = 26;
  kaggle_model.bottom = {512, 256, 64};
  kaggle_model.top = {512, 256};
  dense_optimizer_options adagrad;
  adagrad.kind = dense_optimizer_kind::adagrad;
  adagrad.learning_rate = 0.05f;
  shape kaggle{"kaggle", kaggle_model, 2048, adagrad};
  blas_threads_lease lease;  // as a trainer holds one: blas_threads_apply(2) gives 2 threads
  if (which != "kaggle")
    run_shape(def, reps, min_s);
  if (which != "default")
    run_shape(kaggle, reps, min_s);
  return 0;
}
