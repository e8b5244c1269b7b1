// The interface between a simulated kernel (compiled against metal_stdlib.hpp) and the fiber
// runtime (runtime.cpp), and between the runtime and the Rust harness (mod.rs mirrors the two
// launch structs with #[repr(C)]).
#pragma once

typedef unsigned int msl_sim_u32;
typedef unsigned long long msl_sim_u64;

extern "C" {

// What a simulated thread can ask about itself: the values behind Metal's kernel attributes.
struct msl_sim_thread {
    msl_sim_u32 thread_position_in_threadgroup[3];
    msl_sim_u32 threadgroup_position_in_grid[3];
    msl_sim_u32 threads_per_threadgroup[3];
    msl_sim_u32 threadgroups_per_grid[3];
    msl_sim_u32 thread_index_in_threadgroup;
    msl_sim_u32 thread_index_in_simdgroup;
    msl_sim_u32 simdgroup_index_in_threadgroup;
    msl_sim_u32 simdgroups_per_threadgroup;
    msl_sim_u32 threads_per_simdgroup;
};

// One lane's part in a SIMD-group call: its value, where its result goes, its lane-varying
// argument (a source lane, a delta, a mask).
struct msl_sim_lane {
    const void* in;
    void* out;
    msl_sim_u32 arg;
    msl_sim_u32 lane;
};

// Computes the results of one SIMD-group call for the `count` active lanes (in lane order) of
// a SIMD-group of `width` lanes.
typedef void (*msl_sim_simd_fn)(const msl_sim_lane* lanes, msl_sim_u32 count, msl_sim_u32 width);

const msl_sim_thread* msl_sim_current_thread(void);
void* msl_sim_buffer(msl_sim_u32 index);
void* msl_sim_threadgroup_memory(msl_sim_u32 site, msl_sim_u64 bytes, msl_sim_u64 align);
void msl_sim_threadgroup_barrier(const void* site);
void msl_sim_simd_call(msl_sim_simd_fn op, const void* in, void* out, msl_sim_u32 arg,
                       const void* site);

// A kernel entry as the rewriter registers it: `run` calls the kernel with its attributes bound.
struct msl_sim_kernel {
    const char* name;
    void (*run)(void);
};

struct msl_sim_launch {
    void (*kernel)(void);
    msl_sim_u32 threadgroups[3];
    msl_sim_u32 threads_per_threadgroup[3];
    void* const* buffers;
    msl_sim_u32 buffer_count;
    // 0: threads of a group and the groups run in index order, each thread until it waits;
    // 1: the same in reverse order; 2: a random interleaving drawn from `seed`, in which a
    // thread may also be switched out at any access to memory other than its own stack.
    msl_sim_u32 schedule;
    msl_sim_u32 workers;
    msl_sim_u64 seed;
};

struct msl_sim_report {
    // SIMD-group calls made by a strict subset of the SIMD-group's threads.
    msl_sim_u64 divergent_simd_calls;
    // Barriers released with threads missing (returned early) or waiting at different barriers.
    msl_sim_u64 divergent_barriers;
    msl_sim_u64 simd_calls;
    msl_sim_u64 barriers;
    // Switches to another thread at a memory access (random schedules only).
    msl_sim_u64 interleavings;
    // The most threadgroup memory one threadgroup declared.
    msl_sim_u64 threadgroup_bytes;
    char error[512];
};

// Runs the launch to completion; returns 0, or 1 with `report->error` set.
int msl_sim_run(const msl_sim_launch* launch, msl_sim_report* report);
}
