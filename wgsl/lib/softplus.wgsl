// softplus(x) = log(1 + exp(x)): linear above 20 as torch and ggml do; exp(x) where 1 + exp(x)
// would round to 1.
fn softplus(x: f32) -> f32 {
    if (x > 20.0) {
        return x;
    }
    if (x < -15.0) {
        return exp(x);
    }
    return log(1.0 + exp(x));
}
