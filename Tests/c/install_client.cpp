// install_client.cpp - a C++17 client of an installed liblanepool through its C API
// (scripts/c-install-test builds it with -Wall -Wextra -Wpedantic -Werror and
// `pkg-config --cflags --libs lanepool`, shared and static): the header must be
// C++-clean. Creates a pool, submits tasks to a lane and to a band, syncs, checks the
// version, checks that an exception thrown by an inline sync's function reaches the
// caller and gives the lane back (the library is built with -fexceptions), destroys.
#include <lanepool.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

static_assert(LANEPOOL_VERSION == LANEPOOL_VERSION_MAJOR * 10000 + LANEPOOL_VERSION_MINOR * 100 +
                                      LANEPOOL_VERSION_PATCH,
              "LANEPOOL_VERSION");

namespace {

constexpr int kLaneTasks = 100;
constexpr int kBandTasks = 20;

struct LaneState {
  int next = 0; // touched only by the one lane's thread, then read after sync
  int out_of_order = 0;
  int seen_at_sync = -1;
};

struct Item {
  LaneState *state;
  int index;
};

std::atomic<int> band_ran{0};

struct Thrower {
  std::thread::id caller;
  bool ran_on_lane_thread = false;
};

// Throws when it runs inline, on the caller's thread; on the lane's own thread (the lane
// was not parked, so the sync was queued) it returns instead, since an exception there
// would end the process (std::terminate), and the caller tries again.
void throw_if_inline(void *ctx) {
  auto *t = static_cast<Thrower *>(ctx);
  if (std::this_thread::get_id() != t->caller) {
    t->ran_on_lane_thread = true;
    return;
  }
  throw std::runtime_error("thrown inside an inline sync");
}

// The exception leaves fn on the caller's thread and unwinds through the library's
// inline-sync frame, whose cleanup handler gives the lane back. Without it the lane
// would stay lent (every later task on it waiting forever) and the caller would still
// count as the lane. Returns an error text, or nullptr.
const char *exception_through_inline_sync(lanepool_lane_t *lane) {
  bool caught = false;
  for (int attempt = 0; attempt < 5000 && !caught; attempt++) {
    Thrower t{std::this_thread::get_id()};
    try {
      int rc = lanepool_lane_sync(lane, throw_if_inline, &t);
      if (rc != 0 || !t.ran_on_lane_thread) return "a sync that did not throw failed";
      std::this_thread::sleep_for(std::chrono::milliseconds(1)); // let the lane park
    } catch (const std::runtime_error &) {
      caught = true;
    }
  }
  if (!caught) return "the lane was never idle for an inline sync in 5,000 tries";
  lanepool_lane_t *current = nullptr;
  if (lanepool_current_lane(&current) != ESRCH)
    return "after the throw the caller is still the lane";
  int ran = 0;
  lanepool_fn mark = [](void *ctx) { *static_cast<int *>(ctx) = 1; };
  if (lanepool_lane_async(lane, mark, &ran) != 0) return "async after the throw failed";
  if (lanepool_lane_sync_flags(
          lane, [](void *) {}, nullptr, LANEPOOL_SYNC_QUEUED) != 0 ||
      ran != 1)
    return "the lane did not run a task after the throw";
  return nullptr;
}

bool ok(int rc, const char *what) {
  if (rc != 0) std::fprintf(stderr, "install_client (C++): %s returned %d\n", what, rc);
  return rc == 0;
}

} // namespace

int main() {
  const std::string version = lanepool_version();
  if (version != LANEPOOL_VERSION_STRING) {
    std::fprintf(stderr, "install_client (C++): lanepool_version() is \"%s\", header says \"%s\"\n",
                 version.c_str(), LANEPOOL_VERSION_STRING);
    return 1;
  }

  lanepool_config_t cfg;
  if (!ok(lanepool_config_init(&cfg), "lanepool_config_init")) return 1;
  cfg.name = "install-cpp";
  cfg.lanes_per_band = 1;
  lanepool_t *pool = nullptr;
  if (!ok(lanepool_create(&cfg, &pool), "lanepool_create")) return 1;
  // struct_size: set by the header's inline wrappers, checked by the installed library.
  lanepool_info_t info;
  info.struct_size = 3;
  if (lanepool_info_sized(pool, &info) != EINVAL ||
      !ok(lanepool_info(pool, &info), "lanepool_info") || info.struct_size != sizeof info ||
      cfg.struct_size != sizeof cfg) {
    std::fprintf(stderr, "install_client (C++): struct_size not set or not checked\n");
    return 1;
  }

  LaneState state;
  std::vector<Item> items;
  items.reserve(kLaneTasks);
  lanepool_lane_t *lane = nullptr;
  if (!ok(lanepool_next_lane(pool, LANEPOOL_QOS_USER_INITIATED, &lane), "lanepool_next_lane"))
    return 1;
  // Captureless lambdas convert to the C function pointer type lanepool_fn.
  lanepool_fn ordered = [](void *ctx) {
    auto *item = static_cast<Item *>(ctx);
    if (item->index != item->state->next) item->state->out_of_order++;
    item->state->next = item->index + 1;
  };
  for (int i = 0; i < kLaneTasks; i++) {
    items.push_back(Item{&state, i});
    if (!ok(lanepool_lane_async(lane, ordered, &items.back()), "lanepool_lane_async")) return 1;
  }
  lanepool_fn at_sync = [](void *ctx) {
    auto *s = static_cast<LaneState *>(ctx);
    s->seen_at_sync = s->next;
  };
  if (!ok(lanepool_lane_sync(lane, at_sync, &state), "lanepool_lane_sync")) return 1;
  for (int i = 0; i < kBandTasks; i++) {
    if (!ok(lanepool_async(
                pool, LANEPOOL_QOS_UTILITY, [](void *) { band_ran.fetch_add(1); }, nullptr),
            "lanepool_async"))
      return 1;
  }
  if (const char *failure = exception_through_inline_sync(lane)) {
    std::fprintf(stderr, "install_client (C++): %s\n", failure);
    return 1;
  }
  if (!ok(lanepool_destroy(pool), "lanepool_destroy")) return 1; // drains

  if (state.seen_at_sync != kLaneTasks || state.out_of_order != 0 ||
      band_ran.load() != kBandTasks) {
    std::fprintf(stderr,
                 "install_client (C++): sync saw %d of %d, %d out of order, band ran %d of %d\n",
                 state.seen_at_sync, kLaneTasks, state.out_of_order, band_ran.load(), kBandTasks);
    return 1;
  }
  std::printf("install_client (C++17): lanepool %s (LANEPOOL_VERSION %d), %d lane tasks in "
              "order before sync, %d band tasks, an exception through an inline sync, numa %d\n",
              version.c_str(), LANEPOOL_VERSION, kLaneTasks, kBandTasks, lanepool_numa_supported());
  return 0;
}
