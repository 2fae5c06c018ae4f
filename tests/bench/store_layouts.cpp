// Issue 17, the proposal of tests/bench/README.md: address the row from the hash, with no row
// number in between. A bench-only experiment, not the store: it times, on the bench's ids, a
// layout where each id's row lies beside the id in one 80-byte slot {id, meta, 68-byte row} of a
// d-ary cuckoo table (d = 4 candidate slots, each from its own hash; load 0.95, so 84.2 bytes per
// 68-byte payload row = 1.238x), against the flat gather and the store (embedding_table).
//
// A lookup needs no chain for the ids that live in the slots it prefetches up front: `cuckoo1`
// prefetches the first-choice slot (2 lines) and copies the row as soon as the id matches there;
// the others (whose first choice holds another id) get their remaining slots prefetched and are
// finished 16 ids later. `cuckoo2` prefetches the first two choices up front (4 lines). Insertion
// keeps ids at their earliest choice where it can (an id displaces one that sits at a later choice
// of its own than the slot would be for the newcomer; when all its choices hold ids at earlier or
// equal choices, a random kick). `hot_cuckoo1` / `hot_cuckoo2` run on a second table filled with
// the batches' ids first, marked referenced (an oracle: where hot ids would sit if they were moved
// to their first choice online and insertion spared referenced ids). The program prints at which
// choice the rows and the batches' ids sit.
// `plain` / `hot_plain` / `promote_plain`: no software pipeline at all, a loop over the choices (the
// address follows from the id, so the out-of-order core runs ahead as in the flat gather), on the
// first table, the hot-first one, and a third filled as the first whose ids found beyond their
// first choice are moved forward on a hit (cuckoo::promote, a breadth-first search of the given
// depth). Updates (row-wise Adagrad step in place) are timed the same way for each layout.
// Variant numbers (for the order argument): 0 flat, 1 store, 2 peek, 3 cuckoo1, 4 cuckoo2,
// 5 hot_cuckoo1, 6 flat_upd, 7 store_upd, 8 cuckoo2_upd, 9 hot_cuckoo1_upd, 10 hot_cuckoo2,
// 11 plain, 12 hot_plain, 13 hot_plain_upd, 14 promote_plain, 15 promote_plain_upd.
//
// Per batch every variant runs once, in turn, on this thread's CPU clock; figures are medians (ns
// per id) over reps x batches (see `cold` below).
// usage: store_layouts [rows=10M] [reps=3] [load=0.95] [warm|cold] [order: variant numbers, e.g.
//        0,1,4,12] [promote search depth 1-5 = 3: paths of up to depth + 1 moves]
#include "models/embedding/embedding_table.hpp"
#include "models/embedding/huge_pages.hpp"
#include "models/embedding/id_map.hpp"
#include "tests/bench/store_bench_ids.hpp"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace satrap;

namespace {

constexpr int dim = 16;
constexpr size_t batch_ids = 65536, row_floats = dim + 1, ahead = 16, choices = 4;

// One slot: the id, meta (bit 0 used, bit 1 referenced, bits 2-3 which choice the slot is for the
// id, bit 4 promotion searched without a path), the row (16 weights + the row-wise Adagrad
// accumulator). 80 bytes: at 16-byte offsets in a line, every slot spans exactly two lines.
struct slot {
  uint64_t id;
  uint32_t meta;
  float row[row_floats];
};
static_assert(sizeof(slot) == 80);

struct cuckoo {
  slot* s = nullptr;
  size_t n = 0, size = 0, kicks = 0;
  size_t promoted = 0, blocked = 0, no_path = 0;
  size_t depth = 3;  // promote: the search goes `depth` slots deep (paths of up to depth + 1 moves)
  static constexpr size_t max_nodes =
    1 + 3 + 9 + 27 + 81 + 243;  // promote outcomes: moved, first choice referenced, no path
  std::mt19937_64 rng{5};
  explicit cuckoo(size_t slots)
      : s(static_cast<slot*>(huge_alloc(slots * sizeof(slot)))), n(slots) {
    std::memset(static_cast<void*>(s), 0, slots * sizeof(slot));
  }
  ~cuckoo() { huge_free(s, n * sizeof(slot)); }
  static uint64_t hash(uint64_t id, size_t k) {
    return mix64(id ^ (0x2545f4914f6cdd1dULL + 0x9e3779b97f4a7c15ULL * k));
  }
  size_t pos(uint64_t id, size_t k) const {
    return static_cast<size_t>((static_cast<unsigned __int128>(hash(id, k)) * n) >> 64);
  }
  void prefetch(size_t p) const {
    prefetch_line(&s[p]);
    prefetch_line(reinterpret_cast<const char*>(&s[p]) + sizeof(slot) - 1);
  }
  bool holds(size_t p, uint64_t id) const { return (s[p].meta & 1) && s[p].id == id; }
  size_t empty_choice(uint64_t id) const {  // the earliest choice of id that is empty, or choices
    size_t k = 0;
    while (k < choices && (s[pos(id, k)].meta & 1))
      ++k;
    return k;
  }
  void put(size_t p, slot v, size_t k) {
    v.meta =
      (v.meta & 2u) | 1u | static_cast<uint32_t>(k << 2);  // a moved id may be searched for again
    s[p] = v;
  }
  // Earliest choice first: the id goes to its earliest choice that is empty or held by an id
  // sitting at a later choice of its own (which then moves on by the same rule); when every choice
  // is held by ids at an earlier or the same choice, a random kick (never straight back to the slot
  // the id was just put out of, nor may the kicked id take that slot back). Ids marked referenced
  // (the CLOCK bit; `hot`) rank before all others: a referenced id displaces an unreferenced one
  // at any choice, and is displaced only by a referenced id at an earlier choice, and kicked only
  // when every candidate is referenced.
  bool insert(uint64_t id, const float* row, bool hot = false) {
    slot cur{id, hot ? 3u : 1u, {}};
    std::memcpy(cur.row, row, sizeof cur.row);
    return insert_slot(cur);
  }
  // Marks the id in slot p referenced and moves it to an earlier choice (the first that works)
  // when a path of at most depth + 1 moves of unreferenced ids leads from there to an empty slot or to p
  // (breadth first, level by level with the next level's slots prefetched, no slot twice);
  // otherwise it stays, marked (meta bit 4) so that it is not
  // searched for again. The online version of the hot-first fill. Returns the
  // slot the id is in.
  size_t promote(size_t p) {
    s[p].meta |= 2;
    if (s[p].meta & 16)
      return p;  // tried before and found no path: not again (one search per id)
    const size_t kv = (s[p].meta >> 2) & 3;
    for (size_t t = 0; t < kv; ++t) {
      size_t x0 = pos(s[p].id, t);
      if (x0 == p)
        continue;
      if (s[x0].meta & 2) {
        if (t == 0)
          ++blocked;
        continue;
      }
      if (!(s[x0].meta & 1)) {  // empty: just move
        put(x0, s[p], t);
        s[p].meta = 0;
        ++promoted;
        return x0;
      }
      // nodes: slots whose unreferenced occupant would move on; parent index per node
      size_t node[max_nodes], parent[max_nodes], nodes = 1, end = SIZE_MAX, end_from = 0;
      node[0] = x0;
      parent[0] = SIZE_MAX;
      for (size_t i = 0, level_end = 0; i < nodes && end == SIZE_MAX; ++i) {
        if (i == level_end) {  // a new level: prefetch the slots all its nodes' ids may move to
          level_end = nodes;
          for (size_t q = i; q < nodes; ++q)
            for (size_t c = 0; c < choices; ++c)
              prefetch_line(&s[pos(s[node[q]].id, c)]);
        }
        size_t depth = 0;
        for (size_t q = i; parent[q] != SIZE_MAX; q = parent[q])
          ++depth;
        const uint64_t u = s[node[i]].id;
        for (size_t c = 0; c < choices && end == SIZE_MAX; ++c) {
          size_t y = pos(u, c);
          if (y == node[i])
            continue;
          if (y == p || !(s[y].meta & 1)) {
            end = y;
            end_from = i;
          } else if (depth + 1 < this->depth && !(s[y].meta & 2) && nodes < max_nodes
                     && std::find(node, node + nodes, y) == node + nodes) {
            node[nodes] = y;
            parent[nodes++] = i;
          }
        }
      }
      if (end == SIZE_MAX)
        continue;
      slot v = s[p];
      if (end != p)
        ++size;  // v's old slot is freed below; the count stays
      for (size_t i = end_from, to = end;; to = node[i], i = parent[i]) {
        slot m = s[node[i]];
        size_t c = 0;
        while (pos(m.id, c) != to)
          ++c;
        put(to, m, c);
        if (parent[i] == SIZE_MAX)
          break;
      }
      if (end != p) {
        s[p].meta = 0;
        --size;
      }
      put(x0, v, t);
      ++promoted;
      return x0;
    }
    ++no_path;
    s[p].meta |= 16;
    return p;
  }
  static size_t rank(uint32_t meta, size_t k) { return ((meta & 2) ? 0 : choices) + k; }
  bool insert_slot(slot cur) {
    ++size;
    size_t from = SIZE_MAX;
    for (int step = 0; step < 20000; ++step) {
      size_t k = 0, p = 0;
      for (; k < choices; ++k) {
        p = pos(cur.id, k);
        if (p == from)
          continue;
        if (!(s[p].meta & 1)) {
          put(p, cur, k);
          return true;
        }
        if (rank(s[p].meta, (s[p].meta >> 2) & 3) > rank(cur.meta, k))
          break;
      }
      if (k == choices) {
        size_t cold_k[choices], cold_n = 0;
        for (size_t c = 0; c < choices; ++c)
          if (pos(cur.id, c) != from && !(s[pos(cur.id, c)].meta & 2))
            cold_k[cold_n++] = c;
        if (cold_n > 0) {
          k = cold_k[rng() % cold_n];
          p = pos(cur.id, k);
        } else {
          do {
            k = rng() % choices;
            p = pos(cur.id, k);
          } while (p == from);
        }
        ++kicks;
      }
      slot out = s[p];
      put(p, cur, k);
      cur = out;
      from = p;
    }
    --size;
    return false;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  size_t rows = argc > 1 ? std::stoull(argv[1]) : 10'000'000;
  int reps = argc > 2 ? std::stoi(argv[2]) : 3;
  double load = argc > 3 ? std::stod(argv[3]) : 0.95;
  bool cold = argc > 4 && std::string(argv[4]) == "cold";
  auto batches = bench::id_batches(rows, 8, batch_ids, 20240611);

  embedding_options o;
  o.dim = dim;
  o.optimizer = sparse_optimizer_kind::rowwise_adagrad;
  o.learning_rate = 0.01f;
  o.capacity = rows;
  const sparse_kernels& kern = sparse_kernels_select(simd_choice::automatic);
  const step_params sp = step_params::of(o);

  embedding_table store(o);
  std::vector<float> out(batch_ids * dim), g(batch_ids * dim);
  std::mt19937 grng(7);
  for (auto& x : g)
    x = std::normal_distribution<float>(0.0f, 0.01f)(grng);
  {
    std::vector<uint64_t> ids(batch_ids);
    for (size_t b = 0; b < rows; b += batch_ids) {
      size_t n = std::min(batch_ids, rows - b);
      for (size_t i = 0; i < n; ++i)
        ids[i] = b + i;
      store.lookup({ids.data(), n}, out.data());
    }
  }
  auto* flat = static_cast<float*>(huge_alloc(rows * row_floats * 4));
  for (size_t r = 0; r < rows; ++r)
    embedding_init_row(o, r, flat + r * row_floats);

  const size_t slots = static_cast<size_t>(std::ceil(static_cast<double>(rows) / load));
  cuckoo ck(slots), ch(slots), cp(slots);
  cp.depth = argc > 6 ? std::min<size_t>(5, std::stoull(argv[6])) : 3;
  // ch is filled hot ids first: the batches' ids by how many batches hold them, then the rest. An
  // oracle, the bound of what moving hot ids to their first choice online (on a hit at a later
  // choice) could reach.
  std::vector<uint64_t> hot_first;
  size_t hot_n = 0;  // the batches' distinct ids: inserted referenced
  {
    std::vector<uint8_t> count(rows, 0);
    for (auto& b : batches)
      for (uint64_t id : b)
        ++count[id];
    for (int c = static_cast<int>(batches.size()); c >= 0; --c)
      for (size_t r = 0; r < rows; ++r)
        if (count[r] == c)
          hot_first.push_back(r);
    hot_n = rows - static_cast<size_t>(std::count(count.begin(), count.end(), 0));
  }
  for (cuckoo* c : {&ck, &ch, &cp}) {
    double t0 = bench::thread_cpu_s();
    for (size_t i = 0; i < rows; ++i) {
      uint64_t r = c == &ch ? hot_first[i] : i;
      float row[row_floats];
      embedding_init_row(o, r, row);
      row[dim] = o.initial_accumulator;
      if (!c->insert(r, row, c == &ch && i < hot_n)) {
        std::printf("cuckoo: insert failed at %zu rows (load %.3f)\n", i, double(i) / double(c->n));
        return 1;
      }
    }
    double fill_s = bench::thread_cpu_s() - t0;
    size_t at[choices] = {};
    for (size_t p = 0; p < c->n; ++p)
      if (c->s[p].meta & 1)
        ++at[(c->s[p].meta >> 2) & 3];
    size_t bat[choices] = {}, total = 0, found = 0;
    for (uint64_t id = 0; id < rows; ++id)
      for (size_t k = 0; k < choices; ++k)
        if (c->holds(c->pos(id, k), id)) {
          ++found;
          break;
        }
    if (found != rows)
      std::printf("cuckoo: %zu of %zu ids found after the fill\n", found, rows);
    for (auto& b : batches)
      for (uint64_t id : b)
        for (size_t k = 0; k < choices; ++k)
          if (c->holds(c->pos(id, k), id))
            ++bat[k], ++total;
    std::printf(
      "cuckoo%s: %zu rows in %zu slots (load %.3f, %.1f bytes per row, %.3f of the 68-byte payload), "
      "filled in %.1f CPU s, %zu random kicks; choice of all rows %.3f %.3f %.3f %.3f, of the batches' ids "
      "%.3f %.3f %.3f %.3f\n",
      c == &ch   ? " (hot ids first)"
      : c == &cp ? " (promote)"
                 : "",
      c->size, c->n, double(c->size) / double(c->n), double(c->n * sizeof(slot)) / double(rows),
      double(c->n * sizeof(slot)) / double(rows) / 68.0, fill_s, c->kicks,
      double(at[0]) / double(c->size), double(at[1]) / double(c->size),
      double(at[2]) / double(c->size), double(at[3]) / double(c->size),
      double(bat[0]) / double(total), double(bat[1]) / double(total),
      double(bat[2]) / double(total), double(bat[3]) / double(total));
  }

  // up: how many choices are prefetched up front; the rest of an id's choices are prefetched when
  // those miss, and searched `ahead` ids later. op(row, k) copies or steps the row of id k.
  constexpr size_t ring = 4 * ahead;
  auto run_cuckoo = [&](cuckoo& ck, const std::vector<uint64_t>& ids, size_t up, auto&& op) {
    size_t pending[ring];
    const size_t n = ids.size();
    for (size_t i = 0; i < n + 2 * ahead; ++i) {
      if (i < n)
        for (size_t k = 0; k < up; ++k)
          ck.prefetch(ck.pos(ids[i], k));
      if (i >= ahead && i - ahead < n) {
        size_t j = i - ahead;
        uint64_t id = ids[j];
        pending[j % ring] = 0;
        size_t k = 0;
        for (; k < up; ++k) {
          size_t p = ck.pos(id, k);
          if (ck.holds(p, id)) {
            op(ck.s[p], j);
            break;
          }
        }
        if (k == up) {
          pending[j % ring] = 1;
          for (k = up; k < choices; ++k)
            ck.prefetch(ck.pos(id, k));
        }
      }
      if (i >= 2 * ahead) {
        size_t j = i - 2 * ahead;
        if (!pending[j % ring])
          continue;
        uint64_t id = ids[j];
        for (size_t k = up; k < choices; ++k) {
          size_t p = ck.pos(id, k);
          if (ck.holds(p, id)) {
            op(ck.s[p], j);
            break;
          }
        }
      }
    }
  };
  // No software pipeline at all: the slot's address follows from the id, so the core's
  // out-of-order window runs ahead on its own, as in the flat gather.
  // promote: an id found beyond its first choice is moved forward where it can (cuckoo::promote).
  auto plain = [&](cuckoo& ck, const std::vector<uint64_t>& ids, auto&& op, bool promote = false) {
    for (size_t j = 0; j < ids.size(); ++j)
      for (size_t k = 0; k < choices; ++k) {
        size_t p = ck.pos(ids[j], k);
        if (ck.holds(p, ids[j])) {
          op(ck.s[p], j);
          if (promote && k > 0)
            ck.promote(p);
          break;
        }
      }
  };
  auto copy_op = [&](slot& sl, size_t j) {
    if (!((sl.meta >> 1) & 1))
      sl.meta |= 2;  // CLOCK bit, written only when not yet set
    std::memcpy(&out[j * dim], sl.row, dim * 4);
  };
  auto step_op = [&](slot& sl, size_t j) {
    sl.meta |= 2;
    kern.step(sp, sl.row, sl.row + dim, &g[j * dim]);
  };

  const char* names[] = {"flat",        "store",           "peek",          "cuckoo1",
                         "cuckoo2",     "hot_cuckoo1",     "flat_upd",      "store_upd",
                         "cuckoo2_upd", "hot_cuckoo1_upd", "hot_cuckoo2",   "plain",
                         "hot_plain",   "hot_plain_upd",   "promote_plain", "promote_plain_upd"};
  constexpr int variants = 16;
  std::vector<double> t[variants];
  // Back to back on the same table and ids, a variant finds what the one before it brought into
  // this machine's 480 MiB L3 (peek after lookup ran ~30% faster for it). So, by default, each table
  // sees one lookup variant per batch, the tables in turn, then one update each (as the bench runs
  // them); peek, cuckoo1 and hot_cuckoo2 run only with `cold`, where 1 GiB is streamed through before every
  // variant (no variant finds its lines in a cache).
  std::vector<int> order = cold ? std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
                                : std::vector<int>{0, 1, 4, 5, 6, 7, 8, 9};
  if (argc > 5) {  // an explicit order: variant numbers, comma-separated
    order.clear();
    for (const char* q = argv[5]; *q;) {
      char* end = nullptr;
      order.push_back(static_cast<int>(std::strtol(q, &end, 10)));
      q = *end ? end + 1 : end;
    }
  }
  std::vector<uint64_t> flush(cold ? (size_t{1} << 30) / 8 : 0, 1);
  double sink = 0;
  for (int rep = 0; rep < reps; ++rep)
    for (auto& b : batches) {
      const size_t n = b.size();
      for (int v : order) {
        if (cold) {
          uint64_t x = 0;
          for (size_t i = 0; i < flush.size(); i += 8)
            x += flush[i]++;
          sink += static_cast<double>(x & 1);
        }
        double c0 = bench::thread_cpu_s();
        switch (v) {
          case 0:
            for (size_t i = 0; i < n; ++i)
              std::memcpy(&out[i * dim], flat + b[i] * row_floats, dim * 4);
            break;
          case 1: store.lookup(b, out.data()); break;
          case 2: store.peek(b, out.data()); break;
          case 3: run_cuckoo(ck, b, 1, copy_op); break;
          case 4: run_cuckoo(ck, b, 2, copy_op); break;
          case 5: run_cuckoo(ch, b, 1, copy_op); break;
          case 6:
            for (size_t i = 0; i < n; ++i) {
              float* r = flat + b[i] * row_floats;
              kern.step(sp, r, r + dim, &g[i * dim]);
            }
            break;
          case 7: store.update(b, g.data()); break;
          case 8: run_cuckoo(ck, b, 2, step_op); break;
          case 9: run_cuckoo(ch, b, 1, step_op); break;
          case 10: run_cuckoo(ch, b, 2, copy_op); break;
          case 11: plain(ck, b, copy_op); break;
          case 12: plain(ch, b, copy_op); break;
          case 13: plain(ch, b, step_op); break;
          case 14: plain(cp, b, copy_op, true); break;
          case 15: plain(cp, b, step_op, true); break;
        }
        t[v].push_back((bench::thread_cpu_s() - c0) * 1e9 / static_cast<double>(n));
        sink += out[5] + out[n * dim - 1];
      }
    }
  std::printf(
    "%zu rows, 8 x %zu Zipf(1.1) ids, %d reps, kernels %s; AnonHugePages %zu MiB (flat %zu MiB, store "
    "%zu MiB, each cuckoo table %zu MiB); ns per id, thread CPU time, medians (sink %g):\n",
    rows, batch_ids, reps, kern.name, (bench::anon_huge_kib() / 1024), rows * row_floats * 4 >> 20,
    static_cast<size_t>(store.counters().bytes >> 20), ck.n * sizeof(slot) >> 20, sink);
  if (!t[14].empty()) {
    size_t at[choices] = {}, total = 0;
    for (auto& b : batches)
      for (uint64_t id : b)
        for (size_t k = 0; k < choices; ++k)
          if (cp.holds(cp.pos(id, k), id))
            ++at[k], ++total;
    size_t found = 0;
    for (uint64_t id = 0; id < rows; ++id)
      for (size_t k = 0; k < choices; ++k)
        if (cp.holds(cp.pos(id, k), id)) {
          ++found;
          break;
        }
    std::printf(
      "promote (paths of up to %zu moves): %zu of %zu ids found, %zu held; %zu hot ids: %zu moved, %zu "
      "first choice held by a referenced id, %zu no path; the batches' ids now at choice %.3f %.3f %.3f "
      "%.3f; promote_plain ns per id by rep:",
      cp.depth + 1, found, rows, cp.size, hot_n, cp.promoted, cp.blocked, cp.no_path,
      double(at[0]) / double(total), double(at[1]) / double(total), double(at[2]) / double(total),
      double(at[3]) / double(total));
    for (int r = 0; r < reps; ++r)
      std::printf(" %.1f", bench::median(std::vector<double>(t[14].begin() + r * 8,
                                                             t[14].begin() + r * 8 + 8)));
    std::printf("\n");
  }
  std::printf("(%s)\n", cold ? "cold: 1 GiB streamed before each variant"
                             : "warm: one variant per table in turn");
  for (int v : order)
    std::printf("%-12s %7.1f\n", names[v], bench::median(t[v]));
  double f = bench::median(t[0]), fu = bench::median(t[6]);
  auto ratio = [&](double base, int v) { return t[v].empty() ? 0.0 : base / bench::median(t[v]); };
  std::printf(
    "store_lookup_ratio=%.3f peek_ratio=%.3f cuckoo1_lookup_ratio=%.3f cuckoo2_lookup_ratio=%.3f "
    "hot_cuckoo1_lookup_ratio=%.3f hot_cuckoo2_lookup_ratio=%.3f store_update_ratio=%.3f "
    "cuckoo2_update_ratio=%.3f hot_cuckoo1_update_ratio=%.3f plain_lookup_ratio=%.3f hot_plain_lookup_ratio=%.3f "
    "hot_plain_update_ratio=%.3f promote_plain_lookup_ratio=%.3f promote_plain_update_ratio=%.3f "
    "cuckoo_bytes_ratio=%.3f\n",
    ratio(f, 1), ratio(f, 2), ratio(f, 3), ratio(f, 4), ratio(f, 5), ratio(f, 10), ratio(fu, 7),
    ratio(fu, 8), ratio(fu, 9), ratio(f, 11), ratio(f, 12), ratio(fu, 13), ratio(f, 14),
    ratio(fu, 15), double(ck.n * sizeof(slot)) / double(rows) / 68.0);
  huge_free(flat, rows * row_floats * 4);
  return 0;
}
