// The fiber runtime of the MSL simulator: every GPU thread of a threadgroup is a fiber on one OS
// thread; threadgroups are spread over worker threads. A fiber runs until it waits at a
// threadgroup barrier or a SIMD-group call, or (in a random schedule) until the scheduler
// switches it out at a memory access. A SIMD-group call completes as soon as every lane of its
// SIMD-group waits, whatever the other SIMD-groups do; a barrier releases when every thread of
// the group waits.
#include "runtime.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if !defined(__x86_64__)
#error "the MSL simulator's context switch is written for x86-64"
#endif

// Saves the callee-saved registers, MXCSR and the x87 control word on the current stack, stores
// the stack pointer in *save, and resumes the stack `load` the same way. A new fiber's stack is
// prepared so that the resume "returns" into msl_sim_fiber_start with r12 = argument and
// r13 = function.
extern "C" void msl_sim_switch(void** save, void* load);
extern "C" void msl_sim_fiber_start(void);
asm(R"(
    .text
    .globl msl_sim_switch
    .hidden msl_sim_switch
    .type msl_sim_switch, @function
msl_sim_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size msl_sim_switch, .-msl_sim_switch

    .globl msl_sim_fiber_start
    .hidden msl_sim_fiber_start
    .type msl_sim_fiber_start, @function
msl_sim_fiber_start:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size msl_sim_fiber_start, .-msl_sim_fiber_start
)");

namespace {

constexpr uint32_t SIMD_WIDTH = 32;
constexpr uint32_t MAX_THREADS_PER_THREADGROUP = 1024;
constexpr uint64_t THREADGROUP_MEMORY_LIMIT = 32 * 1024;
// Room for kernels that exceed the limit, so that they still run and the report says by how much.
constexpr uint64_t THREADGROUP_ARENA_BYTES = 1 << 20;
constexpr size_t STACK_BYTES = 64 * 1024;
constexpr uint32_t INITIAL_MXCSR = 0x1F80;
constexpr uint32_t INITIAL_FPU_CONTROL = 0x037F;

enum class FiberState { Runnable, SimdWait, BarrierWait, Done };

struct Fiber {
    void* sp;
    FiberState state;
    msl_sim_thread thread;
    // While in SimdWait: the call and this lane's part in it.
    msl_sim_simd_fn op;
    msl_sim_lane lane;
    const void* site;
    // SIMD-group calls made so far: lanes at one site are one call only if they agree on it.
    uint64_t simd_calls;
};

struct Counters {
    uint64_t divergent_simd_calls = 0;
    uint64_t divergent_barriers = 0;
    uint64_t simd_calls = 0;
    uint64_t barriers = 0;
    uint64_t interleavings = 0;
    uint64_t threadgroup_bytes = 0;
};

enum class Schedule : uint32_t { Forward = 0, Reverse = 1, Random = 2 };

// splitmix64: a fresh, well-mixed stream per (seed, threadgroup), so that a random schedule does
// not depend on which worker runs which group.
uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Fiber stacks with a guard page below each, kept for reuse by later dispatches.
struct StackArena {
    char* base = nullptr;
    size_t stacks = 0;

    static size_t slot_bytes() { return STACK_BYTES + static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

    char* top(size_t i) const { return base + (i + 1) * slot_bytes(); }
};

std::mutex arena_pool_lock;
std::vector<StackArena> arena_pool;

bool take_arena(size_t stacks, StackArena* out) {
    {
        std::lock_guard<std::mutex> guard(arena_pool_lock);
        for (size_t i = 0; i < arena_pool.size(); i++) {
            if (arena_pool[i].stacks >= stacks) {
                *out = arena_pool[i];
                arena_pool.erase(arena_pool.begin() + static_cast<long>(i));
                return true;
            }
        }
    }
    size_t bytes = stacks * StackArena::slot_bytes();
    void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) return false;
    StackArena arena;
    arena.base = static_cast<char*>(mem);
    arena.stacks = stacks;
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    for (size_t i = 0; i < stacks; i++) {
        mprotect(arena.base + i * StackArena::slot_bytes(), page, PROT_NONE);
    }
    *out = arena;
    return true;
}

void give_back_arena(const StackArena& arena) {
    std::lock_guard<std::mutex> guard(arena_pool_lock);
    arena_pool.push_back(arena);
}

struct Dispatch {
    const msl_sim_launch* launch;
    std::atomic<uint64_t> next_group{0};
    uint64_t group_count = 0;
    std::mutex lock;
    Counters totals;
    std::string error;

    void fail(const char* message) {
        std::lock_guard<std::mutex> guard(lock);
        if (error.empty()) error = message;
    }
};

struct ThreadgroupAllocation {
    uint32_t site;
    char* memory;
};

struct Worker {
    Dispatch* dispatch;
    Schedule schedule;
    StackArena stacks;
    std::vector<Fiber> fibers;
    uint32_t threads = 0;
    void* scheduler_sp = nullptr;
    char* threadgroup_arena = nullptr;
    uint64_t threadgroup_used = 0;
    std::vector<ThreadgroupAllocation> threadgroup_allocations;
    uint64_t rng = 0;
    Counters counters;

    void run_group(uint64_t linear);
    // The fiber at position k of the run order.
    uint32_t at(uint32_t k) const { return schedule == Schedule::Reverse ? threads - 1 - k : k; }
    uint64_t random() { return rng = mix(rng); }
    int next_runnable(uint32_t* cursor);
    bool complete_simd_call(uint32_t first);
    void release_barrier();
};

thread_local Worker* current_worker = nullptr;
thread_local Fiber* current_fiber = nullptr;
// Dispatches in a random schedule now running in this process: while none is, a memory access
// costs one load (thread-local variables of a dlopen'ed library cost a call each).
std::atomic<uint32_t> random_dispatches{0};
// Returned for an unbound buffer index, so that the dispatch finishes and reports the error.
alignas(64) char unbound_buffer[1 << 16];

void fiber_main(Fiber* fiber) {
    current_worker->dispatch->launch->kernel();
    fiber->state = FiberState::Done;
    msl_sim_switch(&fiber->sp, current_worker->scheduler_sp);
}

void prepare_stack(Fiber* fiber, char* top) {
    // The resume pops r15, r14, r13, r12, rbx, rbp below a return address at top - 24, which
    // leaves the stack 16-byte aligned when msl_sim_fiber_start makes its call.
    uint64_t* ret = reinterpret_cast<uint64_t*>(top - 24);
    ret[0] = reinterpret_cast<uint64_t>(&msl_sim_fiber_start);
    ret[-1] = 0;                                             // rbp
    ret[-2] = 0;                                             // rbx
    ret[-3] = reinterpret_cast<uint64_t>(fiber);             // r12: argument
    ret[-4] = reinterpret_cast<uint64_t>(&fiber_main);       // r13: function
    ret[-5] = 0;                                             // r14
    ret[-6] = 0;                                             // r15
    ret[-7] = INITIAL_MXCSR | (uint64_t{INITIAL_FPU_CONTROL} << 32);
    fiber->sp = &ret[-7];
}

void Worker::run_group(uint64_t linear) {
    const msl_sim_launch& launch = *dispatch->launch;
    const uint32_t* tg = launch.threadgroups;
    const uint32_t* tpt = launch.threads_per_threadgroup;
    uint32_t group[3] = {static_cast<uint32_t>(linear % tg[0]),
                         static_cast<uint32_t>(linear / tg[0] % tg[1]),
                         static_cast<uint32_t>(linear / tg[0] / tg[1])};
    uint32_t simdgroups = (threads + SIMD_WIDTH - 1) / SIMD_WIDTH;
    for (uint32_t i = 0; i < threads; i++) {
        Fiber& f = fibers[i];
        f = Fiber{};
        msl_sim_thread& t = f.thread;
        t.thread_position_in_threadgroup[0] = i % tpt[0];
        t.thread_position_in_threadgroup[1] = i / tpt[0] % tpt[1];
        t.thread_position_in_threadgroup[2] = i / tpt[0] / tpt[1];
        for (int d = 0; d < 3; d++) {
            t.threadgroup_position_in_grid[d] = group[d];
            t.threads_per_threadgroup[d] = tpt[d];
            t.threadgroups_per_grid[d] = tg[d];
        }
        t.thread_index_in_threadgroup = i;
        t.thread_index_in_simdgroup = i % SIMD_WIDTH;
        t.simdgroup_index_in_threadgroup = i / SIMD_WIDTH;
        t.simdgroups_per_threadgroup = simdgroups;
        t.threads_per_simdgroup = SIMD_WIDTH;
        f.state = FiberState::Runnable;
        prepare_stack(&f, stacks.top(i));
    }
    threadgroup_used = 0;
    threadgroup_allocations.clear();
    rng = mix(dispatch->launch->seed ^ mix(linear));

    // In the fixed orders, the cursor only moves back to the start of a SIMD-group whose call
    // just completed, so that this SIMD-group runs ahead of the others up to its next wait: the
    // schedule that exposes a SIMD-group reading what another has not written yet.
    uint32_t cursor = 0;
    for (;;) {
        int next = next_runnable(&cursor);
        if (next < 0) {
            // Every SIMD-group call whose lanes all wait has completed (see below): what is left
            // waits at a barrier, or is done.
            bool any_waiting = false;
            for (uint32_t i = 0; i < threads; i++) {
                any_waiting |= fibers[i].state == FiberState::BarrierWait;
            }
            if (!any_waiting) break;
            release_barrier();
            cursor = 0;
            continue;
        }
        Fiber& f = fibers[next];
        current_fiber = &f;
        msl_sim_switch(&scheduler_sp, f.sp);
        current_fiber = nullptr;
        // A fiber that stopped (waits or is done) may be the last of its SIMD-group to wait.
        uint32_t first = static_cast<uint32_t>(next) / SIMD_WIDTH * SIMD_WIDTH;
        if (f.state != FiberState::Runnable && complete_simd_call(first)) {
            uint32_t last = std::min(first + SIMD_WIDTH, threads) - 1;
            cursor = std::min(cursor, schedule == Schedule::Reverse ? threads - 1 - last : first);
        }
    }
    counters.threadgroup_bytes = std::max(counters.threadgroup_bytes, threadgroup_used);
}

// A runnable fiber: in the fixed orders the first at or after the cursor (fibers before it all
// wait), in a random schedule any. -1 when none is.
int Worker::next_runnable(uint32_t* cursor) {
    if (schedule == Schedule::Random) {
        uint32_t start = static_cast<uint32_t>(random() % threads);
        for (uint32_t k = 0; k < threads; k++) {
            uint32_t i = (start + k) % threads;
            if (fibers[i].state == FiberState::Runnable) return static_cast<int>(i);
        }
        return -1;
    }
    for (; *cursor < threads; ++*cursor) {
        uint32_t i = at(*cursor);
        if (fibers[i].state == FiberState::Runnable) return static_cast<int>(i);
    }
    return -1;
}

// When every lane of the SIMD-group starting at `first` waits and some wait in a SIMD-group
// call, the lanes at the earliest such call (fewest calls made, then first in run order) complete
// it together. Returns whether they did.
bool Worker::complete_simd_call(uint32_t first) {
    uint32_t width = std::min(SIMD_WIDTH, threads - first);
    const Fiber* leader = nullptr;
    for (uint32_t k = 0; k < width; k++) {
        uint32_t l = schedule == Schedule::Reverse ? width - 1 - k : k;
        const Fiber& f = fibers[first + l];
        if (f.state == FiberState::Runnable) return false;
        if (f.state == FiberState::SimdWait && (!leader || f.simd_calls < leader->simd_calls)) {
            leader = &f;
        }
    }
    if (!leader) return false;
    // Copied: the leader's own count moves on as it joins.
    const void* site = leader->site;
    uint64_t call = leader->simd_calls;
    msl_sim_simd_fn op = leader->op;
    msl_sim_lane lanes[SIMD_WIDTH];
    uint32_t count = 0;
    for (uint32_t l = 0; l < width; l++) {
        Fiber& f = fibers[first + l];
        if (f.state == FiberState::SimdWait && f.site == site && f.simd_calls == call &&
            f.op == op) {
            lanes[count++] = f.lane;
            f.state = FiberState::Runnable;
            f.simd_calls++;
        }
    }
    op(lanes, count, SIMD_WIDTH);
    counters.simd_calls++;
    if (count != width) counters.divergent_simd_calls++;
    return true;
}

void Worker::release_barrier() {
    const void* site = nullptr;
    bool divergent = false;
    for (uint32_t i = 0; i < threads; i++) {
        Fiber& f = fibers[i];
        if (f.state == FiberState::Done) {
            divergent = true;
            continue;
        }
        if (site && f.site != site) divergent = true;
        site = f.site;
        f.state = FiberState::Runnable;
    }
    counters.barriers++;
    if (divergent) counters.divergent_barriers++;
}

void run_worker(Dispatch* dispatch) {
    const msl_sim_launch& launch = *dispatch->launch;
    const uint32_t* tpt = launch.threads_per_threadgroup;
    uint32_t threads = tpt[0] * tpt[1] * tpt[2];
    Worker worker;
    worker.dispatch = dispatch;
    worker.schedule = static_cast<Schedule>(launch.schedule);
    worker.threads = threads;
    if (!take_arena(threads, &worker.stacks)) {
        dispatch->fail("could not map fiber stacks");
        return;
    }
    worker.fibers.resize(threads);
    std::unique_ptr<char[]> arena(new char[THREADGROUP_ARENA_BYTES]);
    worker.threadgroup_arena = arena.get();
    current_worker = &worker;
    for (;;) {
        uint64_t k = dispatch->next_group.fetch_add(1);
        if (k >= dispatch->group_count) break;
        bool reverse = worker.schedule == Schedule::Reverse;
        worker.run_group(reverse ? dispatch->group_count - 1 - k : k);
    }
    current_worker = nullptr;
    give_back_arena(worker.stacks);
    std::lock_guard<std::mutex> guard(dispatch->lock);
    Counters& t = dispatch->totals;
    t.divergent_simd_calls += worker.counters.divergent_simd_calls;
    t.divergent_barriers += worker.counters.divergent_barriers;
    t.simd_calls += worker.counters.simd_calls;
    t.barriers += worker.counters.barriers;
    t.interleavings += worker.counters.interleavings;
    t.threadgroup_bytes = std::max(t.threadgroup_bytes, worker.counters.threadgroup_bytes);
}

}  // namespace

extern "C" const msl_sim_thread* msl_sim_current_thread(void) { return &current_fiber->thread; }

extern "C" void* msl_sim_buffer(msl_sim_u32 index) {
    const msl_sim_launch& launch = *current_worker->dispatch->launch;
    if (index >= launch.buffer_count || !launch.buffers[index]) {
        char message[128];
        snprintf(message, sizeof message, "the kernel reads [[buffer(%u)]] but %u buffers are bound",
                 index, launch.buffer_count);
        current_worker->dispatch->fail(message);
        return unbound_buffer;
    }
    return launch.buffers[index];
}

extern "C" void* msl_sim_threadgroup_memory(msl_sim_u32 site, msl_sim_u64 bytes,
                                            msl_sim_u64 align) {
    Worker& w = *current_worker;
    for (const ThreadgroupAllocation& a : w.threadgroup_allocations) {
        if (a.site == site) return a.memory;
    }
    uint64_t start = (w.threadgroup_used + align - 1) / align * align;
    if (start + bytes > THREADGROUP_ARENA_BYTES) {
        w.dispatch->fail("threadgroup memory beyond the simulator's 1 MiB arena");
        return unbound_buffer;
    }
    w.threadgroup_used = start + bytes;
    if (w.threadgroup_used > THREADGROUP_MEMORY_LIMIT) {
        char message[128];
        snprintf(message, sizeof message, "threadgroup memory of %llu bytes exceeds 32 KiB",
                 static_cast<unsigned long long>(w.threadgroup_used));
        w.dispatch->fail(message);
    }
    char* memory = w.threadgroup_arena + start;
    // All-ones bytes are NaN as float and half: a read before the write it needs shows up.
    memset(memory, 0xFF, bytes);
    w.threadgroup_allocations.push_back({site, memory});
    return memory;
}

extern "C" void msl_sim_threadgroup_barrier(const void* site) {
    Fiber* f = current_fiber;
    f->state = FiberState::BarrierWait;
    f->site = site;
    msl_sim_switch(&f->sp, current_worker->scheduler_sp);
}

extern "C" void msl_sim_simd_call(msl_sim_simd_fn op, const void* in, void* out, msl_sim_u32 arg,
                                  const void* site) {
    Fiber* f = current_fiber;
    f->state = FiberState::SimdWait;
    f->op = op;
    f->lane = msl_sim_lane{in, out, arg, f->thread.thread_index_in_simdgroup};
    f->site = site;
    msl_sim_switch(&f->sp, current_worker->scheduler_sp);
}

extern "C" int msl_sim_run(const msl_sim_launch* launch, msl_sim_report* report) {
    memset(report, 0, sizeof *report);
    const uint32_t* tpt = launch->threads_per_threadgroup;
    uint64_t threads = uint64_t{tpt[0]} * tpt[1] * tpt[2];
    if (threads == 0 || threads > MAX_THREADS_PER_THREADGROUP) {
        snprintf(report->error, sizeof report->error,
                 "%llu threads per threadgroup (Metal allows 1 to %u)",
                 static_cast<unsigned long long>(threads), MAX_THREADS_PER_THREADGROUP);
        return 1;
    }
    if (launch->schedule > static_cast<uint32_t>(Schedule::Random)) {
        snprintf(report->error, sizeof report->error, "unknown schedule %u", launch->schedule);
        return 1;
    }
    Dispatch dispatch;
    dispatch.launch = launch;
    dispatch.group_count =
        uint64_t{launch->threadgroups[0]} * launch->threadgroups[1] * launch->threadgroups[2];
    uint64_t workers = std::max<uint64_t>(1, std::min<uint64_t>(launch->workers, dispatch.group_count));
    bool random = launch->schedule == static_cast<uint32_t>(Schedule::Random);
    if (random) random_dispatches.fetch_add(1);
    if (workers == 1) {
        run_worker(&dispatch);
    } else {
        std::vector<std::thread> pool;
        for (uint64_t i = 0; i < workers; i++) pool.emplace_back(run_worker, &dispatch);
        for (std::thread& t : pool) t.join();
    }
    if (random) random_dispatches.fetch_sub(1);
    report->divergent_simd_calls = dispatch.totals.divergent_simd_calls;
    report->divergent_barriers = dispatch.totals.divergent_barriers;
    report->simd_calls = dispatch.totals.simd_calls;
    report->barriers = dispatch.totals.barriers;
    report->interleavings = dispatch.totals.interleavings;
    report->threadgroup_bytes = dispatch.totals.threadgroup_bytes;
    if (!dispatch.error.empty()) {
        snprintf(report->error, sizeof report->error, "%s", dispatch.error.c_str());
        return 1;
    }
    return 0;
}

// ---- memory accesses: g++'s ThreadSanitizer instrumentation (-fsanitize=thread, see mod.rs)
// calls these before every load and store the kernel makes, and before every atomic operation;
// no sanitizer runtime is linked, these are its only definitions. In a random schedule each
// access to memory other than the fiber stacks (threadgroup, device and constant memory) may
// hand the OS thread to another fiber first, with even odds.

namespace {

void memory_access(const void* address) {
    if (random_dispatches.load(std::memory_order_relaxed) == 0) return;
    Worker* w = current_worker;
    Fiber* f = current_fiber;
    if (!w || !f || w->schedule != Schedule::Random) return;
    uintptr_t offset = reinterpret_cast<uintptr_t>(address) - reinterpret_cast<uintptr_t>(w->stacks.base);
    if (offset < w->stacks.stacks * StackArena::slot_bytes()) return;
    if (w->random() & 1) return;
    w->counters.interleavings++;
    msl_sim_switch(&f->sp, w->scheduler_sp);
}

}  // namespace

#define MSL_SIM_ACCESS_HOOKS(n)                                                              \
    extern "C" void __tsan_read##n(void* a) { memory_access(a); }                            \
    extern "C" void __tsan_write##n(void* a) { memory_access(a); }                           \
    extern "C" void __tsan_unaligned_read##n(void* a) { memory_access(a); }                  \
    extern "C" void __tsan_unaligned_write##n(void* a) { memory_access(a); }                 \
    extern "C" void __tsan_volatile_read##n(void* a) { memory_access(a); }                   \
    extern "C" void __tsan_volatile_write##n(void* a) { memory_access(a); }
MSL_SIM_ACCESS_HOOKS(1)
MSL_SIM_ACCESS_HOOKS(2)
MSL_SIM_ACCESS_HOOKS(4)
MSL_SIM_ACCESS_HOOKS(8)
MSL_SIM_ACCESS_HOOKS(16)
#undef MSL_SIM_ACCESS_HOOKS

extern "C" void __tsan_read_range(void* a, unsigned long) { memory_access(a); }
extern "C" void __tsan_write_range(void* a, unsigned long) { memory_access(a); }
extern "C" void __tsan_init(void) {}
extern "C" void __tsan_func_entry(void*) {}
extern "C" void __tsan_func_exit(void) {}
extern "C" void __tsan_vptr_update(void**, void*) {}
extern "C" void __tsan_atomic_thread_fence(int) {}
extern "C" void __tsan_atomic_signal_fence(int) {}

// Atomics: the switch comes before the operation, which itself stays indivisible (device memory
// is shared with the other worker threads, hence real atomic instructions).
#define MSL_SIM_ATOMIC_HOOKS(bits)                                                           \
    typedef uint##bits##_t a##bits;                                                          \
    extern "C" a##bits __tsan_atomic##bits##_load(const volatile a##bits* a, int) {          \
        memory_access(const_cast<const a##bits*>(a));                                        \
        return __atomic_load_n(a, __ATOMIC_RELAXED);                                         \
    }                                                                                        \
    extern "C" void __tsan_atomic##bits##_store(volatile a##bits* a, a##bits v, int) {       \
        memory_access(const_cast<const a##bits*>(a));                                        \
        __atomic_store_n(a, v, __ATOMIC_RELAXED);                                            \
    }                                                                                        \
    MSL_SIM_ATOMIC_RMW(bits, exchange, __atomic_exchange_n)                                  \
    MSL_SIM_ATOMIC_RMW(bits, fetch_add, __atomic_fetch_add)                                  \
    MSL_SIM_ATOMIC_RMW(bits, fetch_sub, __atomic_fetch_sub)                                  \
    MSL_SIM_ATOMIC_RMW(bits, fetch_and, __atomic_fetch_and)                                  \
    MSL_SIM_ATOMIC_RMW(bits, fetch_or, __atomic_fetch_or)                                    \
    MSL_SIM_ATOMIC_RMW(bits, fetch_xor, __atomic_fetch_xor)                                  \
    MSL_SIM_ATOMIC_RMW(bits, fetch_nand, __atomic_fetch_nand)                                \
    extern "C" int __tsan_atomic##bits##_compare_exchange_strong(                            \
        volatile a##bits* a, a##bits* expected, a##bits desired, int, int) {                 \
        memory_access(const_cast<const a##bits*>(a));                                        \
        return __atomic_compare_exchange_n(a, expected, desired, false, __ATOMIC_RELAXED,    \
                                           __ATOMIC_RELAXED);                                \
    }                                                                                        \
    extern "C" int __tsan_atomic##bits##_compare_exchange_weak(                              \
        volatile a##bits* a, a##bits* expected, a##bits desired, int, int) {                 \
        memory_access(const_cast<const a##bits*>(a));                                        \
        return __atomic_compare_exchange_n(a, expected, desired, true, __ATOMIC_RELAXED,     \
                                           __ATOMIC_RELAXED);                                \
    }                                                                                        \
    extern "C" a##bits __tsan_atomic##bits##_compare_exchange_val(                           \
        volatile a##bits* a, a##bits expected, a##bits desired, int, int) {                  \
        memory_access(const_cast<const a##bits*>(a));                                        \
        __atomic_compare_exchange_n(a, &expected, desired, false, __ATOMIC_RELAXED,          \
                                    __ATOMIC_RELAXED);                                       \
        return expected;                                                                     \
    }
#define MSL_SIM_ATOMIC_RMW(bits, name, builtin)                                              \
    extern "C" a##bits __tsan_atomic##bits##_##name(volatile a##bits* a, a##bits v, int) {   \
        memory_access(const_cast<const a##bits*>(a));                                        \
        return builtin(a, v, __ATOMIC_RELAXED);                                              \
    }
MSL_SIM_ATOMIC_HOOKS(8)
MSL_SIM_ATOMIC_HOOKS(16)
MSL_SIM_ATOMIC_HOOKS(32)
MSL_SIM_ATOMIC_HOOKS(64)
#undef MSL_SIM_ATOMIC_RMW
#undef MSL_SIM_ATOMIC_HOOKS
