// The MSL simulator's stand-in for <metal_stdlib>: Metal's scalar and vector types (with
// swizzles and packed types), math, barriers, SIMD-group functions and atomics, in C++20 for g++.
// The rewriter (rewrite.rs) has already erased address spaces and bound kernel parameters to
// the helpers in namespace msl_sim at the end of this file. No libc or C++ library header is
// included: their global math and integer names would collide with Metal's.
#pragma once

#include "runtime.h"

#define INFINITY __builtin_inff()
#define HUGE_VALF __builtin_inff()
#define MAXFLOAT 0x1.fffffep+127f
#define FLT_MAX 0x1.fffffep+127f
#define NAN __builtin_nanf("")
#define M_PI_F 3.14159265358979323846264338327950288f

typedef decltype(sizeof(0)) size_t;
typedef decltype((char*)0 - (char*)0) ptrdiff_t;

namespace metal {

typedef _Float16 half;
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;

namespace detail {

template <class A, class B> struct same { static constexpr bool value = false; };
template <class A> struct same<A, A> { static constexpr bool value = true; };

template <class T> struct scalar { static constexpr bool value = false; };
#define MSL_SIM_SCALAR(T) \
    template <> struct scalar<T> { static constexpr bool value = true; };
MSL_SIM_SCALAR(bool)
MSL_SIM_SCALAR(char)
MSL_SIM_SCALAR(signed char)
MSL_SIM_SCALAR(unsigned char)
MSL_SIM_SCALAR(short)
MSL_SIM_SCALAR(unsigned short)
MSL_SIM_SCALAR(int)
MSL_SIM_SCALAR(unsigned int)
MSL_SIM_SCALAR(long)
MSL_SIM_SCALAR(unsigned long)
MSL_SIM_SCALAR(long long)
MSL_SIM_SCALAR(unsigned long long)
MSL_SIM_SCALAR(_Float16)
MSL_SIM_SCALAR(float)
MSL_SIM_SCALAR(double)
#undef MSL_SIM_SCALAR

template <class T> concept arithmetic = scalar<T>::value;

template <class T> constexpr int storage(int n, bool packed) { return n == 3 && !packed ? 4 : n; }

}  // namespace detail

template <class T, int N, bool Packed = false> struct vec;

// A swizzle of a vector whose storage is S elements: reads and writes the components I.
template <class T, int S, int... I> struct swizzle {
    static constexpr int n = sizeof...(I);
    using value_type = vec<T, n>;
    T v[S];

    operator value_type() const { return value_type(v[I]...); }
    swizzle& operator=(const value_type& o) {
        int k = 0;
        ((v[I] = o.v[k++]), ...);
        return *this;
    }
    swizzle& operator=(const swizzle& o) { return *this = value_type(o); }
    template <class B> swizzle& operator+=(const B& b) { return *this = value_type(*this) + b; }
    template <class B> swizzle& operator-=(const B& b) { return *this = value_type(*this) - b; }
    template <class B> swizzle& operator*=(const B& b) { return *this = value_type(*this) * b; }
    template <class B> swizzle& operator/=(const B& b) { return *this = value_type(*this) / b; }
    T operator[](int k) const { return value_type(*this)[k]; }
};

namespace detail {

template <class X> struct vtraits {
    static constexpr bool is_vec = false;
    static constexpr int n = 1;
    using elem = X;
};
template <class T, int N, bool P> struct vtraits<vec<T, N, P>> {
    static constexpr bool is_vec = true;
    static constexpr int n = N;
    using elem = T;
};
template <class T, int S, int... I> struct vtraits<swizzle<T, S, I...>> {
    static constexpr bool is_vec = true;
    static constexpr int n = sizeof...(I);
    using elem = T;
};

template <class X> concept vecish = vtraits<X>::is_vec;
template <class X> concept valueish = vecish<X> || arithmetic<X>;

// The plain (aligned) vector type of a vector, swizzle or packed vector; scalars stay scalars.
template <class X> struct value_of { using type = X; };
template <class T, int N, bool P> struct value_of<vec<T, N, P>> { using type = vec<T, N>; };
template <class T, int S, int... I> struct value_of<swizzle<T, S, I...>> {
    using type = vec<T, sizeof...(I)>;
};
template <class X> using value_t = typename value_of<X>::type;

}  // namespace detail

#define MSL_SIM_VEC_BODY(N)                                                                      \
    vec() {}                                                                                     \
    vec(const vec& o) { copy(o); }                                                               \
    vec& operator=(const vec& o) {                                                               \
        copy(o);                                                                                 \
        return *this;                                                                            \
    }                                                                                            \
    template <detail::arithmetic U> vec(U s) {                                                   \
        for (int k = 0; k < N; k++) v[k] = static_cast<T>(s);                                   \
    }                                                                                            \
    template <bool P2> vec(const vec<T, N, P2>& o) {                                             \
        for (int k = 0; k < N; k++) v[k] = o.v[k];                                               \
    }                                                                                            \
    template <class U, bool P2>                                                                  \
        requires(!detail::same<U, T>::value)                                                     \
    explicit vec(const vec<U, N, P2>& o) {                                                       \
        for (int k = 0; k < N; k++) v[k] = static_cast<T>(o.v[k]);                               \
    }                                                                                            \
    template <int S2, int... I>                                                                  \
        requires(sizeof...(I) == N)                                                              \
    vec(const swizzle<T, S2, I...>& o) : vec(vec<T, N>(o.v[I]...)) {}                            \
    template <class A, class B, class... R>                                                      \
    vec(const A& a, const B& b, const R&... r) {                                                 \
        int k = 0;                                                                               \
        put(k, a);                                                                               \
        put(k, b);                                                                               \
        (put(k, r), ...);                                                                        \
    }                                                                                            \
    T& operator[](int k) { return v[k]; }                                                        \
    const T& operator[](int k) const { return v[k]; }                                            \
    template <class B> vec& operator+=(const B& b) { return *this = *this + b; }                 \
    template <class B> vec& operator-=(const B& b) { return *this = *this - b; }                 \
    template <class B> vec& operator*=(const B& b) { return *this = *this * b; }                 \
    template <class B> vec& operator/=(const B& b) { return *this = *this / b; }                 \
    template <class B> vec& operator%=(const B& b) { return *this = *this % b; }                 \
    template <class B> vec& operator&=(const B& b) { return *this = *this & b; }                 \
    template <class B> vec& operator|=(const B& b) { return *this = *this | b; }                 \
    template <class B> vec& operator^=(const B& b) { return *this = *this ^ b; }                 \
    template <class B> vec& operator<<=(const B& b) { return *this = *this << b; }               \
    template <class B> vec& operator>>=(const B& b) { return *this = *this >> b; }               \
                                                                                                 \
   private:                                                                                      \
    void copy(const vec& o) {                                                                    \
        for (int k = 0; k < S; k++) v[k] = o.v[k];                                               \
    }                                                                                            \
    template <class A> void put(int& k, const A& a) {                                            \
        if constexpr (detail::vecish<A>) {                                                       \
            detail::value_t<A> w = a;                                                            \
            for (int j = 0; j < detail::vtraits<A>::n; j++) v[k++] = static_cast<T>(w.v[j]);     \
        } else {                                                                                 \
            v[k++] = static_cast<T>(a);                                                          \
        }                                                                                        \
    }                                                                                            \
                                                                                                 \
   public:

template <class T, bool Packed>
struct alignas(Packed ? alignof(T) : 2 * sizeof(T)) vec<T, 2, Packed> {
    static constexpr int S = detail::storage<T>(2, Packed);
    union {
        T v[2];
        struct {
            T x, y;
        };
        struct {
            T r, g;
        };
#include "swizzles2.inc"
    };
    MSL_SIM_VEC_BODY(2)
};

template <class T, bool Packed>
struct alignas(Packed ? alignof(T) : 4 * sizeof(T)) vec<T, 3, Packed> {
    static constexpr int S = detail::storage<T>(3, Packed);
    union {
        T v[S];
        struct {
            T x, y, z;
        };
        struct {
            T r, g, b;
        };
#include "swizzles3.inc"
    };
    MSL_SIM_VEC_BODY(3)
};

template <class T, bool Packed>
struct alignas(Packed ? alignof(T) : 4 * sizeof(T)) vec<T, 4, Packed> {
    static constexpr int S = detail::storage<T>(4, Packed);
    union {
        T v[4];
        struct {
            T x, y, z, w;
        };
        struct {
            T r, g, b, a;
        };
#include "swizzles4.inc"
    };
    MSL_SIM_VEC_BODY(4)
};
#undef MSL_SIM_VEC_BODY

#define MSL_SIM_VECTORS(T)                 \
    typedef vec<T, 2> T##2;                \
    typedef vec<T, 3> T##3;                \
    typedef vec<T, 4> T##4;                \
    typedef vec<T, 2, true> packed_##T##2; \
    typedef vec<T, 3, true> packed_##T##3; \
    typedef vec<T, 4, true> packed_##T##4;
MSL_SIM_VECTORS(float)
MSL_SIM_VECTORS(half)
MSL_SIM_VECTORS(int)
MSL_SIM_VECTORS(uint)
MSL_SIM_VECTORS(short)
MSL_SIM_VECTORS(ushort)
MSL_SIM_VECTORS(char)
MSL_SIM_VECTORS(uchar)
MSL_SIM_VECTORS(long)
MSL_SIM_VECTORS(ulong)
MSL_SIM_VECTORS(bool)
#undef MSL_SIM_VECTORS

namespace detail {

template <class A, class B> struct common_elem { using type = typename vtraits<A>::elem; };
template <arithmetic A, class B> struct common_elem<A, B> { using type = typename vtraits<B>::elem; };

template <class A> inline auto component(const A& a, int k) {
    if constexpr (vecish<A>) {
        return value_t<A>(a).v[k];
    } else {
        return a;
    }
}

template <class A, class B> constexpr int width_of() {
    return vtraits<A>::n > vtraits<B>::n ? vtraits<A>::n : vtraits<B>::n;
}

template <class V, class F> inline auto map(const V& a, F f) {
    value_t<V> x = a;
    vec<decltype(f(x.v[0])), vtraits<V>::n> out;
    for (int k = 0; k < vtraits<V>::n; k++) out.v[k] = f(x.v[k]);
    return out;
}

template <class A, class B, class F> inline auto zip(const A& a, const B& b, F f) {
    using E = typename common_elem<A, B>::type;
    constexpr int n = width_of<A, B>();
    vec<decltype(f(E(), E())), n> out;
    for (int k = 0; k < n; k++) {
        out.v[k] = f(static_cast<E>(component(a, k)), static_cast<E>(component(b, k)));
    }
    return out;
}

}  // namespace detail

// Arithmetic keeps the element type (uchar4 + uchar4 is uchar4); comparisons give bool vectors.
#define MSL_SIM_BINARY(op)                                                                   \
    template <detail::valueish A, detail::valueish B>                                        \
        requires(detail::vecish<A> || detail::vecish<B>)                                     \
    inline auto operator op(const A& a, const B& b) {                                        \
        using E = typename detail::common_elem<A, B>::type;                                  \
        return detail::zip(a, b, [](E x, E y) { return static_cast<E>(x op y); });           \
    }
MSL_SIM_BINARY(+)
MSL_SIM_BINARY(-)
MSL_SIM_BINARY(*)
MSL_SIM_BINARY(/)
MSL_SIM_BINARY(%)
MSL_SIM_BINARY(&)
MSL_SIM_BINARY(|)
MSL_SIM_BINARY(^)
MSL_SIM_BINARY(<<)
MSL_SIM_BINARY(>>)
#undef MSL_SIM_BINARY

#define MSL_SIM_COMPARE(op)                                                                  \
    template <detail::valueish A, detail::valueish B>                                        \
        requires(detail::vecish<A> || detail::vecish<B>)                                     \
    inline auto operator op(const A& a, const B& b) {                                        \
        using E = typename detail::common_elem<A, B>::type;                                  \
        return detail::zip(a, b, [](E x, E y) { return bool(x op y); });                     \
    }
MSL_SIM_COMPARE(==)
MSL_SIM_COMPARE(!=)
MSL_SIM_COMPARE(<)
MSL_SIM_COMPARE(<=)
MSL_SIM_COMPARE(>)
MSL_SIM_COMPARE(>=)
MSL_SIM_COMPARE(&&)
MSL_SIM_COMPARE(||)
#undef MSL_SIM_COMPARE

template <detail::vecish A> inline auto operator-(const A& a) {
    using E = typename detail::vtraits<A>::elem;
    return detail::map(a, [](E x) { return static_cast<E>(-x); });
}
template <detail::vecish A> inline auto operator+(const A& a) { return detail::value_t<A>(a); }
template <detail::vecish A> inline auto operator~(const A& a) {
    using E = typename detail::vtraits<A>::elem;
    return detail::map(a, [](E x) { return static_cast<E>(~x); });
}
template <detail::vecish A> inline auto operator!(const A& a) {
    using E = typename detail::vtraits<A>::elem;
    return detail::map(a, [](E x) { return !x; });
}

// ---- reinterpretation ----

template <class T, class F> inline T as_type(const F& from) {
    static_assert(sizeof(T) == sizeof(detail::value_t<F>), "as_type needs types of equal size");
    detail::value_t<F> value = from;
    T to;
    __builtin_memcpy(&to, &value, sizeof(T));
    return to;
}

// ---- math ----

// Each function on floats, halves (computed in float, as the result of a correctly rounded float
// function rounded once more) and, through detail::map, on vectors of them.
#define MSL_SIM_UNARY_FLOAT(name, expr)                                                   \
    inline float name(float x) { return expr; }                                           \
    inline half name(half h) {                                                            \
        float x = h;                                                                      \
        return static_cast<half>(expr);                                                   \
    }                                                                                     \
    template <detail::vecish V> inline auto name(const V& v) {                            \
        return detail::map(v, [](auto e) { return name(e); });                            \
    }
MSL_SIM_UNARY_FLOAT(exp, __builtin_expf(x))
MSL_SIM_UNARY_FLOAT(exp2, __builtin_exp2f(x))
MSL_SIM_UNARY_FLOAT(exp10, __builtin_powf(10.0f, x))
MSL_SIM_UNARY_FLOAT(log, __builtin_logf(x))
MSL_SIM_UNARY_FLOAT(log2, __builtin_log2f(x))
MSL_SIM_UNARY_FLOAT(log10, __builtin_log10f(x))
MSL_SIM_UNARY_FLOAT(sqrt, __builtin_sqrtf(x))
MSL_SIM_UNARY_FLOAT(rsqrt, 1.0f / __builtin_sqrtf(x))
MSL_SIM_UNARY_FLOAT(sin, __builtin_sinf(x))
MSL_SIM_UNARY_FLOAT(cos, __builtin_cosf(x))
MSL_SIM_UNARY_FLOAT(tan, __builtin_tanf(x))
MSL_SIM_UNARY_FLOAT(tanh, __builtin_tanhf(x))
MSL_SIM_UNARY_FLOAT(fabs, __builtin_fabsf(x))
MSL_SIM_UNARY_FLOAT(floor, __builtin_floorf(x))
MSL_SIM_UNARY_FLOAT(ceil, __builtin_ceilf(x))
MSL_SIM_UNARY_FLOAT(round, __builtin_roundf(x))
MSL_SIM_UNARY_FLOAT(trunc, __builtin_truncf(x))
MSL_SIM_UNARY_FLOAT(rint, __builtin_rintf(x))
MSL_SIM_UNARY_FLOAT(fract, x - __builtin_floorf(x))
MSL_SIM_UNARY_FLOAT(saturate, x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x))
MSL_SIM_UNARY_FLOAT(sign, x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f))
#undef MSL_SIM_UNARY_FLOAT

#define MSL_SIM_BINARY_FLOAT(name, expr)                                                  \
    inline float name(float x, float y) { return expr; }                                  \
    inline half name(half hx, half hy) {                                                  \
        float x = hx, y = hy;                                                             \
        return static_cast<half>(expr);                                                   \
    }                                                                                     \
    template <detail::valueish A, detail::valueish B>                                     \
        requires(detail::vecish<A> || detail::vecish<B>)                                  \
    inline auto name(const A& a, const B& b) {                                            \
        return detail::zip(a, b, [](auto x, auto y) { return name(x, y); });              \
    }
MSL_SIM_BINARY_FLOAT(pow, __builtin_powf(x, y))
MSL_SIM_BINARY_FLOAT(powr, __builtin_powf(x, y))
MSL_SIM_BINARY_FLOAT(fmin, __builtin_fminf(x, y))
MSL_SIM_BINARY_FLOAT(fmax, __builtin_fmaxf(x, y))
MSL_SIM_BINARY_FLOAT(fmod, __builtin_fmodf(x, y))
MSL_SIM_BINARY_FLOAT(atan2, __builtin_atan2f(x, y))
MSL_SIM_BINARY_FLOAT(step, y < x ? 0.0f : 1.0f)
MSL_SIM_BINARY_FLOAT(copysign, __builtin_copysignf(x, y))
#undef MSL_SIM_BINARY_FLOAT

inline float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline half fma(half a, half b, half c) {
    return static_cast<half>(__builtin_fmaf(float(a), float(b), float(c)));
}
template <detail::vecish A, detail::valueish B, detail::valueish C>
inline auto fma(const A& a, const B& b, const C& c) {
    using E = typename detail::vtraits<A>::elem;
    detail::value_t<A> out;
    for (int k = 0; k < detail::vtraits<A>::n; k++) {
        out.v[k] = fma(E(detail::component(a, k)), E(detail::component(b, k)),
                       E(detail::component(c, k)));
    }
    return out;
}

// min, max and clamp on every scalar type. Metal compiles with fast math by default, where
// these are fast::min/max/clamp, whose result is undefined when an operand is NaN: here NaN, so
// that a kernel counting on NaN being dropped fails. fmin/fmax drop a NaN operand (documented),
// and so do the precise:: variants below.
namespace detail {
template <class T> constexpr bool floating = same<T, float>::value || same<T, half>::value;
template <class T> inline bool either_nan(T a, T b) {
    if constexpr (floating<T>) {
        return __builtin_isnan(float(a)) || __builtin_isnan(float(b));
    } else {
        return false;
    }
}
}  // namespace detail
template <detail::arithmetic T> inline T min(T a, T b) {
    if (detail::either_nan(a, b)) return static_cast<T>(__builtin_nanf(""));
    return b < a ? b : a;
}
template <detail::arithmetic T> inline T max(T a, T b) {
    if (detail::either_nan(a, b)) return static_cast<T>(__builtin_nanf(""));
    return a < b ? b : a;
}
template <detail::arithmetic T> inline T abs(T a) {
    if constexpr (detail::same<T, float>::value || detail::same<T, half>::value) {
        return static_cast<T>(__builtin_fabsf(a));
    } else {
        return a < T(0) ? static_cast<T>(-a) : a;
    }
}
template <detail::arithmetic T> inline T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
template <detail::valueish A, detail::valueish B>
    requires(detail::vecish<A> || detail::vecish<B>)
inline auto min(const A& a, const B& b) {
    return detail::zip(a, b, [](auto x, auto y) { return min(x, y); });
}
template <detail::valueish A, detail::valueish B>
    requires(detail::vecish<A> || detail::vecish<B>)
inline auto max(const A& a, const B& b) {
    return detail::zip(a, b, [](auto x, auto y) { return max(x, y); });
}
template <detail::vecish A> inline auto abs(const A& a) {
    return detail::map(a, [](auto x) { return abs(x); });
}
template <detail::vecish A, detail::valueish B, detail::valueish C>
inline auto clamp(const A& x, const B& lo, const C& hi) {
    return min(max(x, lo), hi);
}

template <detail::valueish A, detail::valueish B, detail::valueish C>
inline auto mix(const A& x, const B& y, const C& t) {
    return x + (y - x) * t;
}

inline float select(float a, float b, bool c) { return c ? b : a; }
template <detail::arithmetic T> inline T select(T a, T b, bool c) { return c ? b : a; }
template <detail::vecish A, detail::valueish B, detail::vecish C>
inline auto select(const A& a, const B& b, const C& c) {
    detail::value_t<A> out;
    for (int k = 0; k < detail::vtraits<A>::n; k++) {
        out.v[k] = detail::component(c, k) ? detail::component(b, k) : detail::component(a, k);
    }
    return out;
}

inline bool isnan(float x) { return __builtin_isnan(x); }
inline bool isinf(float x) { return __builtin_isinf(x); }
inline bool isfinite(float x) { return __builtin_isfinite(x); }
inline bool isnan(half x) { return __builtin_isnan(float(x)); }
inline bool isinf(half x) { return __builtin_isinf(float(x)); }
inline bool isfinite(half x) { return __builtin_isfinite(float(x)); }
template <detail::vecish V> inline auto isnan(const V& v) {
    return detail::map(v, [](auto x) { return isnan(x); });
}
template <detail::vecish V> inline auto isinf(const V& v) {
    return detail::map(v, [](auto x) { return isinf(x); });
}
template <detail::vecish V> inline auto isfinite(const V& v) {
    return detail::map(v, [](auto x) { return isfinite(x); });
}

template <detail::vecish A, detail::vecish B> inline auto dot(const A& a, const B& b) {
    using E = typename detail::vtraits<A>::elem;
    E sum = E(0);
    for (int k = 0; k < detail::vtraits<A>::n; k++) {
        sum += E(detail::component(a, k)) * E(detail::component(b, k));
    }
    return sum;
}
template <detail::vecish V> inline auto length(const V& v) { return sqrt(dot(v, v)); }
template <detail::vecish V> inline auto normalize(const V& v) { return v * rsqrt(dot(v, v)); }

template <detail::vecish V> inline bool all(const V& v) {
    for (int k = 0; k < detail::vtraits<V>::n; k++)
        if (!detail::component(v, k)) return false;
    return true;
}
template <detail::vecish V> inline bool any(const V& v) {
    for (int k = 0; k < detail::vtraits<V>::n; k++)
        if (detail::component(v, k)) return true;
    return false;
}
inline bool all(bool b) { return b; }
inline bool any(bool b) { return b; }

template <detail::arithmetic T> inline T popcount(T x) {
    return static_cast<T>(__builtin_popcountll(static_cast<unsigned long long>(x) &
                                               (~0ull >> (64 - 8 * sizeof(T)))));
}

namespace fast {
using metal::clamp;
using metal::cos;
using metal::exp;
using metal::exp2;
using metal::fabs;
using metal::fmax;
using metal::fmin;
using metal::log;
using metal::log2;
using metal::max;
using metal::min;
using metal::pow;
using metal::powr;
using metal::rsqrt;
using metal::sin;
using metal::sqrt;
using metal::tanh;
}  // namespace fast
namespace precise {
using fast::cos;
using fast::exp;
using fast::exp2;
using fast::fabs;
using fast::fmax;
using fast::fmin;
using fast::log;
using fast::log2;
using fast::pow;
using fast::powr;
using fast::rsqrt;
using fast::sin;
using fast::sqrt;
using fast::tanh;
// IEEE 754 minNum/maxNum: a NaN operand loses.
inline float min(float a, float b) { return __builtin_fminf(a, b); }
inline float max(float a, float b) { return __builtin_fmaxf(a, b); }
inline float clamp(float x, float lo, float hi) { return min(max(x, lo), hi); }
template <detail::valueish A, detail::valueish B>
    requires(detail::vecish<A> || detail::vecish<B>)
inline auto min(const A& a, const B& b) {
    return detail::zip(a, b, [](auto x, auto y) { return precise::min(float(x), float(y)); });
}
template <detail::valueish A, detail::valueish B>
    requires(detail::vecish<A> || detail::vecish<B>)
inline auto max(const A& a, const B& b) {
    return detail::zip(a, b, [](auto x, auto y) { return precise::max(float(x), float(y)); });
}
}  // namespace precise

// ---- barriers ----

enum class mem_flags : unsigned { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
inline mem_flags operator|(mem_flags a, mem_flags b) {
    return static_cast<mem_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}

// The call sites of barriers and SIMD-group functions tell converged threads from divergent
// ones, so these are never inlined (and the compiler is told not to merge calls: see mod.rs).
__attribute__((noinline)) inline void threadgroup_barrier(mem_flags) {
    msl_sim_threadgroup_barrier(__builtin_return_address(0));
}

// ---- SIMD-group functions ----

namespace detail {

template <class T> inline T lane_in(const msl_sim_lane& l) { return *static_cast<const T*>(l.in); }
template <class T> inline void lane_out(const msl_sim_lane& l, const T& value) {
    *static_cast<T*>(l.out) = value;
}

// A reduction over the active lanes in one fixed pairwise order: every lane gets the same bits.
template <class T, class F> inline void reduce_tree(const msl_sim_lane* lanes, uint count, F f) {
    T values[32];
    for (uint i = 0; i < count; i++) values[i] = lane_in<T>(lanes[i]);
    for (uint n = count; n > 1; n = (n + 1) / 2) {
        for (uint i = 0; i < n / 2; i++) values[i] = f(values[2 * i], values[2 * i + 1]);
        if (n % 2) values[n / 2] = values[n - 1];
    }
    for (uint i = 0; i < count; i++) lane_out<T>(lanes[i], values[0]);
}

template <class T> void sum_op(const msl_sim_lane* l, uint n, uint) {
    reduce_tree<T>(l, n, [](const T& a, const T& b) { return T(a + b); });
}
template <class T> void product_op(const msl_sim_lane* l, uint n, uint) {
    reduce_tree<T>(l, n, [](const T& a, const T& b) { return T(a * b); });
}
// simd_max and simd_min: Metal documents no NaN rule for them; they take max's (NaN wins).
template <class T> void max_op(const msl_sim_lane* l, uint n, uint) {
    reduce_tree<T>(l, n, [](const T& a, const T& b) { return T(metal::max(a, b)); });
}
template <class T> void min_op(const msl_sim_lane* l, uint n, uint) {
    reduce_tree<T>(l, n, [](const T& a, const T& b) { return T(metal::min(a, b)); });
}
template <class T> void and_op(const msl_sim_lane* l, uint n, uint) {
    reduce_tree<T>(l, n, [](const T& a, const T& b) { return T(a & b); });
}
template <class T> void or_op(const msl_sim_lane* l, uint n, uint) {
    reduce_tree<T>(l, n, [](const T& a, const T& b) { return T(a | b); });
}
template <class T> void xor_op(const msl_sim_lane* l, uint n, uint) {
    reduce_tree<T>(l, n, [](const T& a, const T& b) { return T(a ^ b); });
}

template <class T, bool Inclusive> void prefix_sum_op(const msl_sim_lane* l, uint n, uint) {
    T running = T(0);
    T values[32];
    for (uint i = 0; i < n; i++) values[i] = lane_in<T>(l[i]);
    for (uint i = 0; i < n; i++) {
        if (Inclusive) running = T(running + values[i]);
        lane_out<T>(l[i], running);
        if (!Inclusive) running = T(running + values[i]);
    }
}

// Lane `src`'s value where that lane takes part. Metal documents that simd_shuffle_down and
// simd_shuffle_up leave a lane's value as it is where the source lies outside the SIMD-group;
// it gives no value from a lane that is inactive (in a divergent region, returned, or beyond
// the threads of a partial SIMD-group): here all-ones bytes, NaN as float or half, which no
// comparison accepts.
enum class Source { Lane, Down, Up, Xor };
template <class T, Source S> void shuffle_op(const msl_sim_lane* l, uint n, uint width) {
    T values[32];
    int slot[32];
    for (uint k = 0; k < 32; k++) slot[k] = -1;
    for (uint i = 0; i < n; i++) {
        values[i] = lane_in<T>(l[i]);
        slot[l[i].lane] = static_cast<int>(i);
    }
    for (uint i = 0; i < n; i++) {
        uint lane = l[i].lane, arg = l[i].arg;
        uint src = S == Source::Lane ? arg
                   : S == Source::Down ? lane + arg
                   : S == Source::Up   ? (arg > lane ? width : lane - arg)
                                       : lane ^ arg;
        bool shifted_out = (S == Source::Down || S == Source::Up) && src >= width;
        if (shifted_out) {
            lane_out<T>(l[i], values[i]);
        } else if (src < width && slot[src] >= 0) {
            lane_out<T>(l[i], values[slot[src]]);
        } else {
            T poison;
            __builtin_memset(&poison, 0xFF, sizeof poison);
            lane_out<T>(l[i], poison);
        }
    }
}

template <class T> void broadcast_first_op(const msl_sim_lane* l, uint n, uint) {
    T first = lane_in<T>(l[0]);
    for (uint i = 0; i < n; i++) lane_out<T>(l[i], first);
}

inline void ballot_op(const msl_sim_lane* l, uint n, uint) {
    ulong mask = 0;
    for (uint i = 0; i < n; i++)
        if (lane_in<bool>(l[i])) mask |= 1ul << l[i].lane;
    for (uint i = 0; i < n; i++) lane_out<ulong>(l[i], mask);
}

inline void is_first_op(const msl_sim_lane* l, uint n, uint) {
    for (uint i = 0; i < n; i++) lane_out<bool>(l[i], i == 0);
}

inline void nothing_op(const msl_sim_lane*, uint, uint) {}

template <class T>
__attribute__((noinline)) T simd_call(msl_sim_simd_fn op, T value, uint arg, const void* site) {
    T out;
    msl_sim_simd_call(op, &value, &out, arg, site);
    return out;
}

}  // namespace detail

#define MSL_SIM_SIMD_1(name, op)                                                             \
    template <class X> __attribute__((noinline)) detail::value_t<X> name(const X& x) {       \
        using T = detail::value_t<X>;                                                        \
        return detail::simd_call<T>(&op<T>, T(x), 0, __builtin_return_address(0));          \
    }
MSL_SIM_SIMD_1(simd_sum, detail::sum_op)
MSL_SIM_SIMD_1(simd_product, detail::product_op)
MSL_SIM_SIMD_1(simd_max, detail::max_op)
MSL_SIM_SIMD_1(simd_min, detail::min_op)
MSL_SIM_SIMD_1(simd_and, detail::and_op)
MSL_SIM_SIMD_1(simd_or, detail::or_op)
MSL_SIM_SIMD_1(simd_xor, detail::xor_op)
MSL_SIM_SIMD_1(simd_broadcast_first, detail::broadcast_first_op)
#undef MSL_SIM_SIMD_1

template <class X> __attribute__((noinline)) detail::value_t<X> simd_prefix_inclusive_sum(const X& x) {
    using T = detail::value_t<X>;
    return detail::simd_call<T>(&detail::prefix_sum_op<T, true>, T(x), 0,
                                __builtin_return_address(0));
}
template <class X> __attribute__((noinline)) detail::value_t<X> simd_prefix_exclusive_sum(const X& x) {
    using T = detail::value_t<X>;
    return detail::simd_call<T>(&detail::prefix_sum_op<T, false>, T(x), 0,
                                __builtin_return_address(0));
}

#define MSL_SIM_SIMD_2(name, source)                                                         \
    template <class X> __attribute__((noinline)) detail::value_t<X> name(const X& x, ushort arg) { \
        using T = detail::value_t<X>;                                                        \
        return detail::simd_call<T>(&detail::shuffle_op<T, detail::Source::source>, T(x), arg, \
                                    __builtin_return_address(0));                            \
    }
MSL_SIM_SIMD_2(simd_shuffle, Lane)
MSL_SIM_SIMD_2(simd_broadcast, Lane)
MSL_SIM_SIMD_2(simd_shuffle_down, Down)
MSL_SIM_SIMD_2(simd_shuffle_up, Up)
MSL_SIM_SIMD_2(simd_shuffle_xor, Xor)
#undef MSL_SIM_SIMD_2

struct simd_vote {
    typedef ulong vote_t;
    vote_t bits;
    explicit operator vote_t() const { return bits; }
    bool all() const { return bits == ~0ul; }
    bool any() const { return bits != 0; }
};

__attribute__((noinline)) inline simd_vote simd_ballot(bool b) {
    return simd_vote{detail::simd_call<ulong>(&detail::ballot_op, b, 0, __builtin_return_address(0))};
}
__attribute__((noinline)) inline bool simd_any(bool b) {
    return detail::simd_call<ulong>(&detail::ballot_op, b, 0, __builtin_return_address(0)) != 0;
}
__attribute__((noinline)) inline bool simd_all(bool b) {
    // All active lanes voted yes: the mask of yes-votes equals the mask of voters.
    ulong yes = detail::simd_call<ulong>(&detail::ballot_op, b, 0, __builtin_return_address(0));
    ulong voters = detail::simd_call<ulong>(&detail::ballot_op, true, 0, __builtin_return_address(0));
    return yes == voters;
}
__attribute__((noinline)) inline bool simd_is_first() {
    return detail::simd_call<bool>(&detail::is_first_op, false, 0, __builtin_return_address(0));
}
__attribute__((noinline)) inline void simdgroup_barrier(mem_flags) {
    detail::simd_call<bool>(&detail::nothing_op, false, 0, __builtin_return_address(0));
}

// ---- atomics (device memory is shared by worker threads: real atomic instructions) ----

enum memory_order { memory_order_relaxed };

template <class T> struct atomic {
    T value;
};
typedef atomic<int> atomic_int;
typedef atomic<uint> atomic_uint;
typedef atomic<float> atomic_float;

template <class T> inline T atomic_load_explicit(const volatile atomic<T>* a, memory_order) {
    return __atomic_load_n(&a->value, __ATOMIC_RELAXED);
}
template <class T, class U>
inline void atomic_store_explicit(volatile atomic<T>* a, U v, memory_order) {
    __atomic_store_n(&a->value, static_cast<T>(v), __ATOMIC_RELAXED);
}
template <class T, class U>
inline T atomic_exchange_explicit(volatile atomic<T>* a, U v, memory_order) {
    return __atomic_exchange_n(&a->value, static_cast<T>(v), __ATOMIC_RELAXED);
}
template <class T, class U>
inline bool atomic_compare_exchange_weak_explicit(volatile atomic<T>* a, T* expected, U desired,
                                                  memory_order, memory_order) {
    return __atomic_compare_exchange_n(&a->value, expected, static_cast<T>(desired), true,
                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
template <class T, class U>
inline T atomic_fetch_add_explicit(volatile atomic<T>* a, U v, memory_order) {
    if constexpr (detail::same<T, float>::value) {
        float seen = __atomic_load_n(&a->value, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&a->value, &seen, seen + static_cast<float>(v), true,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        }
        return seen;
    } else {
        return __atomic_fetch_add(&a->value, static_cast<T>(v), __ATOMIC_RELAXED);
    }
}
template <class T, class U>
inline T atomic_fetch_sub_explicit(volatile atomic<T>* a, U v, memory_order) {
    return __atomic_fetch_sub(&a->value, static_cast<T>(v), __ATOMIC_RELAXED);
}
template <class T, class U>
inline T atomic_fetch_or_explicit(volatile atomic<T>* a, U v, memory_order) {
    return __atomic_fetch_or(&a->value, static_cast<T>(v), __ATOMIC_RELAXED);
}
template <class T, class U>
inline T atomic_fetch_and_explicit(volatile atomic<T>* a, U v, memory_order) {
    return __atomic_fetch_and(&a->value, static_cast<T>(v), __ATOMIC_RELAXED);
}
template <class T, class U>
inline T atomic_fetch_max_explicit(volatile atomic<T>* a, U v, memory_order) {
    T seen = __atomic_load_n(&a->value, __ATOMIC_RELAXED);
    while (seen < static_cast<T>(v) &&
           !__atomic_compare_exchange_n(&a->value, &seen, static_cast<T>(v), true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return seen;
}
template <class T, class U>
inline T atomic_fetch_min_explicit(volatile atomic<T>* a, U v, memory_order) {
    T seen = __atomic_load_n(&a->value, __ATOMIC_RELAXED);
    while (static_cast<T>(v) < seen &&
           !__atomic_compare_exchange_n(&a->value, &seen, static_cast<T>(v), true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return seen;
}

}  // namespace metal

// ---- what the rewriter binds kernel parameters and threadgroup declarations to ----

namespace msl_sim {

enum class attribute {
    thread_position_in_grid,
    thread_position_in_threadgroup,
    threadgroup_position_in_grid,
    threads_per_threadgroup,
    threadgroups_per_grid,
    threads_per_grid,
    thread_index_in_threadgroup,
    thread_index_in_simdgroup,
    simdgroup_index_in_threadgroup,
    simdgroups_per_threadgroup,
    threads_per_simdgroup,
    thread_execution_width,
};

template <class T> struct deref { static constexpr bool is_ref = false; };
template <class T> struct deref<T&> {
    static constexpr bool is_ref = true;
    using type = T;
};

// A kernel parameter's value: uint3-valued attributes narrow to the declared width.
template <class T> inline T bind(attribute a) {
    const msl_sim_thread& t = *msl_sim_current_thread();
    metal::uint3 v(0u);
    auto grid = [&](int d) {
        return t.threadgroup_position_in_grid[d] * t.threads_per_threadgroup[d] +
               t.thread_position_in_threadgroup[d];
    };
    switch (a) {
        case attribute::thread_position_in_grid: v = metal::uint3(grid(0), grid(1), grid(2)); break;
        case attribute::thread_position_in_threadgroup:
            v = metal::uint3(t.thread_position_in_threadgroup[0], t.thread_position_in_threadgroup[1],
                             t.thread_position_in_threadgroup[2]);
            break;
        case attribute::threadgroup_position_in_grid:
            v = metal::uint3(t.threadgroup_position_in_grid[0], t.threadgroup_position_in_grid[1],
                             t.threadgroup_position_in_grid[2]);
            break;
        case attribute::threads_per_threadgroup:
            v = metal::uint3(t.threads_per_threadgroup[0], t.threads_per_threadgroup[1],
                             t.threads_per_threadgroup[2]);
            break;
        case attribute::threadgroups_per_grid:
            v = metal::uint3(t.threadgroups_per_grid[0], t.threadgroups_per_grid[1],
                             t.threadgroups_per_grid[2]);
            break;
        case attribute::threads_per_grid:
            v = metal::uint3(t.threadgroups_per_grid[0] * t.threads_per_threadgroup[0],
                             t.threadgroups_per_grid[1] * t.threads_per_threadgroup[1],
                             t.threadgroups_per_grid[2] * t.threads_per_threadgroup[2]);
            break;
        case attribute::thread_index_in_threadgroup: v = metal::uint3(t.thread_index_in_threadgroup); break;
        case attribute::thread_index_in_simdgroup: v = metal::uint3(t.thread_index_in_simdgroup); break;
        case attribute::simdgroup_index_in_threadgroup:
            v = metal::uint3(t.simdgroup_index_in_threadgroup);
            break;
        case attribute::simdgroups_per_threadgroup: v = metal::uint3(t.simdgroups_per_threadgroup); break;
        case attribute::threads_per_simdgroup:
        case attribute::thread_execution_width: v = metal::uint3(t.threads_per_simdgroup); break;
    }
    if constexpr (metal::detail::vecish<T>) {
        T out;
        for (int k = 0; k < metal::detail::vtraits<T>::n; k++) {
            out.v[k] = static_cast<typename metal::detail::vtraits<T>::elem>(v.v[k]);
        }
        return out;
    } else {
        return static_cast<T>(v.x);
    }
}

// A [[buffer(n)]] parameter: a pointer to the bound buffer, or a reference to its start.
template <class T> inline T bind_buffer(unsigned index) {
    void* p = msl_sim_buffer(index);
    if constexpr (deref<T>::is_ref) {
        return *static_cast<typename deref<T>::type*>(p);
    } else {
        return static_cast<T>(p);
    }
}

// A `threadgroup` declaration in a kernel: this threadgroup's copy, NaN-filled at first use.
template <class T> inline T& threadgroup_variable(unsigned site) {
    return *static_cast<T*>(msl_sim_threadgroup_memory(site, sizeof(T), alignof(T)));
}

}  // namespace msl_sim
